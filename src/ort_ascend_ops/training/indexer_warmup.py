"""DeepSeek-V3.2's indexer training (DSA) as a model to train: :func:`indexer_warmup`.

The DeepSeek-V3.2 paper trains the lightning indexer against the frozen main attention, with
``KL(p_t || softmax(I_t))`` for each query token ``t``: ``p_t`` the main attention's probabilities
summed over its heads and L1-normalized, ``I_t`` the indexer's scores; in the sparse stage both
over the keys the indexer selected (``S_t``), the indexer's inputs detached from the model. Over
the selected keys the main attention is itself sparse, so ``p_t`` sums to 1 on ``S_t``, and the
loss's gradient w.r.t. the selected scores is ``softmax(I_t) - p_t``: the ``dy`` of
``LightningIndexerGrad``. :func:`selection_kl` is that loss on one selection, in ONNX.
"""

from __future__ import annotations

import functools
import json

import onnx
import onnx.inliner
from onnx import TensorProto, helper
from onnxscript import script

from ..autodiff import GradientError, depends_on, node_label
from ..domain import DOMAIN
from ..export import PARAMETERS
from ..fusion import fold_constants, fuse
from ..reference._opset import op
from .artifacts import pruned, split_parameters

INDEXER_LOSS = "indexer_loss"
# Finite, so that exp underflows to exactly 0 on the masked slots and nothing computes 0 * inf.
MASK_VALUE = -1e9
_NO_KEY = helper.make_tensor("no_key", TensorProto.INT32, [], [-1])


@script(default_opset=op)
def selection_kl(sparse_indices, sparse_values, p):
    """``sum_t KL(p_t || softmax(sparse_values_t))`` over each token's valid slots (index not
    -1), in float32; ``p`` is 0 on the others and sums to 1 over the valid ones. Invalid slots
    add exactly 0: their logits become ``MASK_VALUE`` before the LogSoftmax, their ``p log q``
    terms 0, and ``p log p`` reads ``log 1`` where ``p`` is 0."""
    valid = op.Not(op.Equal(sparse_indices, op.Constant(value=_NO_KEY)))
    logits = op.Where(valid, sparse_values, op.Constant(value_float=MASK_VALUE))
    zero = op.Constant(value_float=0.0)
    cross = op.Where(valid, p * op.LogSoftmax(logits, axis=-1), zero)
    entropy = p * op.Log(op.Where(op.Greater(p, zero), p, op.Constant(value_float=1.0)))
    return op.ReduceSum(entropy - cross, keepdims=0)


def inline_selection_kl(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its calls of :func:`selection_kl` (a script's, or ``call_selection_kl``'s)
    replaced by the function's nodes, at the model's opset."""
    function = selection_kl.to_function_proto()
    key = (function.domain, function.name)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    for o in function.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = opset  # its ops mean the same in every opset from 18 on
    kept = [f for f in model.functions if (f.domain, f.name) != key]
    del model.functions[:]
    model.functions.extend([*kept, function])
    if not any(o.domain == function.domain for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(function.domain, 1))
    inlined = onnx.inliner.inline_selected_functions(model, [key])
    del inlined.opset_import[:]
    inlined.opset_import.extend(o for o in model.opset_import if o.domain != function.domain)
    return inlined


def call_selection_kl(sparse_indices: str, sparse_values: str, p: str, loss: str) -> onnx.NodeProto:
    function = selection_kl.to_function_proto()
    return helper.make_node(function.name, [sparse_indices, sparse_values, p], [loss], domain=function.domain)


def indexer_warmup(model: onnx.ModelProto) -> onnx.ModelProto:
    """The indexer-training model of a DeepSeek-V3.2 export: its one output ``indexer_loss``
    (``sum_layers sum_tokens KL(p || softmax(I))`` over each layer's selection, as the module
    docstring says), and its recorded parameters (``generate_artifacts``' default
    ``requires_grad``) the indexer's alone: ``wq_b``, ``wk``, ``k_norm`` and ``weights_proj`` of
    every layer, found as the parameters that reach a ``LightningIndexer`` and not the main
    attention (a standard ``Attention`` node, as SDPA exports, is inlined into its function body
    for its probabilities). ``model`` is fused first (``ort_ascend_ops.fuse``) unless it already carries
    ``LightningIndexer`` nodes. Then ``build_training_model(warm, INDEXER_LOSS,
    parameter_names(warm))`` or ``generate_artifacts(warm, optimizer=...)`` differentiate it
    through ``LightningIndexerGrad``; nothing else of the model is trained."""
    if not _indexers(model):
        model = fuse(model)
    if any(n.op_type == "Attention" and n.domain in ("", "ai.onnx") for n in model.graph.node):
        # SDPA exports as Attention-23, whose probabilities only its function body has; the body's
        # casts of constants are folded (ONNX Runtime would warn about each).
        attention = [("", "Attention")]
        model = fold_constants(
            onnx.inliner.inline_selected_functions(model, attention, inline_schema_functions=True)
        )
    model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    graph = model.graph
    indexers = _indexers(model)
    if not indexers:
        raise GradientError(
            "the model has no DeepSeek-V3.2 indexer that fuse() turns into LightningIndexer (it needs a "
            "static-shape export, whose causal mask is a constant)"
        )
    taken = {v for n in graph.node for v in [*n.input, *n.output]} | {i.name for i in graph.initializer}
    if INDEXER_LOSS in taken | {i.name for i in graph.input}:
        raise GradientError(f"the model already has a value '{INDEXER_LOSS}'")
    losses, targets = [], []
    for layer, node in enumerate(indexers):
        probabilities = _main_attention(graph, node)
        targets.append(probabilities)
        prefix = f"{INDEXER_LOSS}/{layer}/"
        graph.node.extend(_selected_target(prefix, probabilities, node.output[0], node.output[1]))
        losses.append(f"{prefix}kl")
        graph.node.append(call_selection_kl(node.output[0], f"{prefix}scores", f"{prefix}p", losses[-1]))
    graph.node.append(helper.make_node("Sum", losses, [INDEXER_LOSS]))
    graph.output.append(helper.make_tensor_value_info(INDEXER_LOSS, TensorProto.FLOAT, []))
    trained = _indexer_parameters(model, indexers, targets)
    warm = pruned(inline_selection_kl(model), [INDEXER_LOSS])
    kept = [p for p in warm.metadata_props if p.key != PARAMETERS]
    del warm.metadata_props[:]
    warm.metadata_props.extend(kept)
    warm.metadata_props.add(key=PARAMETERS, value=json.dumps(trained))
    onnx.checker.check_model(warm)
    return warm


def _indexers(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if _is_indexer(n)]


def _main_attention(graph: onnx.GraphProto, indexer: onnx.NodeProto) -> str:
    """The probabilities ``[B,H,S1,S2]`` of the attention the indexer's selection masks: the
    first Softmax downstream of its indices."""
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    shapes = {v.name: v.type.tensor_type.shape for v in graph.value_info}
    frontier, seen = [indexer.output[0]], set()
    while frontier:
        value = frontier.pop(0)
        for node in consumers.get(value, []):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node.op_type == "Softmax" and node.domain in ("", "ai.onnx"):
                shape = shapes.get(node.output[0])
                if shape is None or len(shape.dim) != 4:
                    raise GradientError(
                        f"{node_label(node)}, the attention the indexer masks, is not [B,H,S1,S2]"
                    )
                return node.output[0]
            frontier.extend(o for o in node.output if o)
    raise GradientError(f"no attention Softmax reads the selection of {node_label(indexer)}")


def _selected_target(prefix: str, probabilities: str, indices: str, values: str) -> list[onnx.NodeProto]:
    """``p``: the probabilities summed over heads, L1-normalized over the keys, at the selected
    keys (0 on the invalid slots); and ``scores``, the selected scores. Both float32, in which the
    loss is computed whatever the model's type."""
    make = helper.make_node
    zero_index = helper.make_tensor("zero", TensorProto.INT32, [], [0])
    return [
        make("Constant", [], [f"{prefix}heads"], value_ints=[1]),
        make("Constant", [], [f"{prefix}keys"], value_ints=[-1]),
        make("ReduceSum", [probabilities, f"{prefix}heads"], [f"{prefix}summed"], keepdims=0),
        make("ReduceSum", [f"{prefix}summed", f"{prefix}keys"], [f"{prefix}total"], keepdims=1),
        make("Div", [f"{prefix}summed", f"{prefix}total"], [f"{prefix}normalized"]),
        make("Constant", [], [f"{prefix}no_key"], value=_NO_KEY),
        make("Constant", [], [f"{prefix}zero_index"], value=zero_index),
        make("Equal", [indices, f"{prefix}no_key"], [f"{prefix}invalid"]),
        make("Where", [f"{prefix}invalid", f"{prefix}zero_index", indices], [f"{prefix}index32"]),
        make("Cast", [f"{prefix}index32"], [f"{prefix}index"], to=TensorProto.INT64),
        make("GatherElements", [f"{prefix}normalized", f"{prefix}index"], [f"{prefix}gathered"], axis=-1),
        make("Cast", [f"{prefix}gathered"], [f"{prefix}float"], to=TensorProto.FLOAT),
        make("Constant", [], [f"{prefix}zero"], value_float=0.0),
        make("Where", [f"{prefix}invalid", f"{prefix}zero", f"{prefix}float"], [f"{prefix}p"]),
        make("Cast", [values], [f"{prefix}scores"], to=TensorProto.FLOAT),
    ]


def _is_indexer(node: onnx.NodeProto) -> bool:
    return node.domain == DOMAIN and node.op_type == "LightningIndexer"


def _indexer_parameters(model: onnx.ModelProto, indexers, targets: list[str]) -> list[str]:
    """Of the parameters generate_artifacts would train by default, those that reach an indexer
    and not the main attention, walking back through no LightningIndexer: its selection is not
    differentiable, and the paper detaches its inputs."""
    graph = model.graph
    candidates, _ = split_parameters(model)
    reach = functools.partial(depends_on, graph, whole_nodes=False, stop_at=_is_indexer)
    feeding = reach([i for n in indexers for i in n.input[:3]])
    main = reach(targets)
    trained = [name for name in candidates if name in feeding and name not in main]
    if not trained:
        raise GradientError("no parameter feeds the indexers alone")
    return trained
