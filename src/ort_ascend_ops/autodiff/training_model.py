"""Reverse-mode differentiation of an ONNX graph: the training model with the loss and one
``<name>_grad`` output per value asked for."""

from __future__ import annotations

from collections.abc import Sequence

import onnx
import onnx.inliner
from onnx import helper

from ..domain import DOMAIN, VERSION
from ..export import padding_rows
from ..fusion import fold_constants
from ..fusion import fuse as fuse_patterns
from ..opschema import register_schemas
from ..reference import attach_functions
from .chunked_loss import chunk_loss
from .graph import Backward, GradientError, depends_on, grad_name
from .recompute import MEMORY_OPTIONS, Recompute, memory_options
from .rules import RULES
from .rules.loss import split_softmax_cross_entropy

_FLOAT_TYPES = {
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.DOUBLE,
    onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16,
}
_MIN_OPSET = 18  # the rules emit ReduceSum/ReduceMean with axes inputs and Split with num_outputs


def _default_opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _inferred(model: onnx.ModelProto) -> onnx.ModelProto:
    return onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)


def _prepared(model: onnx.ModelProto, fuse: bool, wrt: Sequence[str]) -> onnx.ModelProto:
    """A copy, fused (or only constant-folded, ``wrt`` kept), carrying the reference functions
    (both passes attach them) and our domain, shape-inferred."""
    register_schemas()
    if _default_opset(model) < _MIN_OPSET:
        raise GradientError(
            f"the model imports opset {_default_opset(model)}; the gradient rules need opset {_MIN_OPSET} "
            "or newer (onnx.version_converter.convert_version can update it)"
        )
    model = fuse_patterns(model, keep=wrt) if fuse else fold_constants(model, keep=wrt)
    split_softmax_cross_entropy(model.graph)
    if not any(o.domain == DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(DOMAIN, VERSION))
    return _inferred(model)


def _without_rule(graph: onnx.GraphProto, on_path: set[str]) -> list[onnx.NodeProto]:
    """The nodes between a wrt value and the loss that no gradient rule covers."""
    return [
        n
        for n in graph.node
        if (n.domain or "", n.op_type) not in RULES
        and any(o in on_path for o in n.output)
        and any(i in on_path for i in n.input)
    ]


def _has_body(node: onnx.NodeProto, opset: int) -> bool:
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except onnx.defs.SchemaError:
        return False
    # onnx's stubs (1.23) lack these two OpSchema properties.
    return schema.has_function or schema.has_context_dependent_function  # type: ignore[attr-defined]


def _expanded(model: onnx.ModelProto, wrt: Sequence[str], loss: str) -> onnx.ModelProto:
    """The model with every op on the path that has no rule but has a function body in its ONNX
    schema (Attention, Gelu, LayerNormalization, ...) inlined into that body, whose ops the rules
    differentiate."""
    opset = _default_opset(model)
    while True:
        pending = _without_rule(model.graph, _on_path(model.graph, wrt, loss))
        ops = sorted({(n.domain or "", n.op_type) for n in pending if _has_body(n, opset)})
        if not ops:
            return model
        model = _inferred(onnx.inliner.inline_selected_functions(model, ops, inline_schema_functions=True))


def _on_path(graph: onnx.GraphProto, wrt: Sequence[str], loss: str) -> set[str]:
    """Values that depend on some ``wrt`` value and that the loss depends on. Only floating-point
    values carry gradients: an integer or bool output (LightningIndexer's indices, a Shape, an
    Equal mask) stops the path."""
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.value_info, *graph.output]}
    reached = set(wrt)
    for node in graph.node:  # nodes are in topological order
        if any(i in reached for i in node.input):
            reached.update(
                o for o in node.output if o and types.get(o, onnx.TensorProto.FLOAT) in _FLOAT_TYPES
            )
    return reached & depends_on(graph, [loss], whole_nodes=False)


def _added(back: Backward, grads: dict[str, list[str]], name: str, grad: str) -> str:
    """``grad`` added to what reached ``name`` before, as it comes (a weight read by every chunk
    of a loss holds one gradient, not one per chunk), but for the row scatters ``Backward.total``
    joins into one; the value now holding it."""
    kept = grads.setdefault(name, [])
    if len(kept) == 1 and not back.scattered(kept[0]) and not back.scattered(grad):
        kept[0] = back.op("Add", kept[0], grad, hint=name)
    else:
        kept.append(grad)
    return kept[-1]


def build_training_model(
    model: onnx.ModelProto,
    loss: str,
    wrt: Sequence[str],
    *,
    fuse: bool = True,
    loss_scale: str | None = None,
    recompute: str = "none",
    recompute_layers: int | None = None,
    loss_chunk_size: int | None = None,
    frozen: Sequence[str] = (),
) -> onnx.ModelProto:
    """The training model of ``model``: outputs ``loss`` and ``<name>_grad`` for each name in
    ``wrt`` (graph inputs or initializers), shaped and typed like the value. ``fuse`` first
    rewrites the model's norm, rotary and DeepSeek-indexer patterns to our ops
    (``ort_ascend_ops.fuse``), whose grad ops then differentiate them; without it constants are still folded. It carries the
    reference functions, so it runs on stock ONNX Runtime; with the native library registered
    the grad nodes run natively. ``loss_scale`` names a new float32 scalar input that the
    backward starts from instead of 1: every gradient comes out multiplied by it (loss scaling).

    ``recompute``: ``"none"`` keeps every activation the backward reads; ``"full"`` keeps each
    decoder layer's input alone and computes the layer again in the backward, layer by layer;
    ``"selective"`` keeps the layers' products (MatMul, attention) and computes the rest again
    (``recompute.Recompute``); ``recompute_layers``: the first that many layers (None: all). The
    gradients are the same, bit for bit. ``loss_chunk_size``: the cross-entropy over chunks of
    that many rows, its logits computed again in the backward (``chunked_loss``). ``frozen``: the
    graph inputs that are parameters not trained (data-independent, as ``wrt``)."""
    padding = padding_rows(model)
    model = _prepared(model, fuse, wrt)
    graph = model.graph
    declared = {v.name: v for v in [*graph.input, *graph.output, *graph.value_info]}
    initializers = {i.name for i in graph.initializer}
    if loss not in {o.name for o in graph.output}:
        raise GradientError(f"'{loss}' is not an output of the model")
    loss_shape = declared[loss].type.tensor_type.shape
    if any(d.dim_value != 1 for d in loss_shape.dim):
        raise GradientError(f"the loss '{loss}' must be a scalar (or hold one element)")
    inputs = {i.name for i in graph.input} | initializers
    for name in wrt:
        if name not in inputs:
            raise GradientError(f"'{name}' in wrt is neither a graph input nor an initializer")
    if loss_chunk_size is not None:
        model = chunk_loss(model, loss, loss_chunk_size, {*wrt, *frozen, *initializers})
    model = _expanded(model, wrt, loss)
    graph = model.graph
    segments = Recompute(graph, recompute, recompute_layers, [*wrt, *frozen, *initializers])
    declared = {v.name: v for v in [*graph.input, *graph.output, *graph.value_info]}
    on_path = _on_path(graph, wrt, loss)
    missing = _without_rule(graph, on_path)
    if missing:
        first: dict[str, str] = {}
        for n in missing:
            first.setdefault(f"{n.domain or 'ai.onnx'}::{n.op_type}", n.name or n.output[0])
        listed = ", ".join(f"{op} (node '{name}')" for op, name in first.items())
        raise GradientError(f"no gradient rule for {listed}, on the path from {list(wrt)} to '{loss}'")
    back = Backward(model, on_path, padding)
    back.reserve(grad_name(name) for name in wrt)
    for name in wrt:
        if back.elem_type(name) not in _FLOAT_TYPES:
            raise GradientError(f"'{name}' in wrt is not a floating-point tensor")

    path_nodes = [
        n for n in graph.node if any(o in on_path for o in n.output) and any(i in on_path for i in n.input)
    ]

    grads: dict[str, list[str]] = {}
    if loss_scale is None:
        one = helper.make_tensor("value", back.elem_type(loss), [1], [1])
        grads[loss] = [back.op("ConstantOfShape", back.shape_of(loss), value=one, hint=loss)]
    else:
        seed = back.op("Cast", loss_scale, to=back.elem_type(loss))
        grads[loss] = [back.op("Expand", seed, back.shape_of(loss), hint=loss)]
    for node in reversed(path_nodes):
        out_grads = [back.total(grads[o], o) if o in grads else None for o in node.output]
        if all(g is None for g in out_grads):
            continue
        reading = segments.node_for_rule(back, node, out_grads)
        in_grads = RULES[(node.domain or "", node.op_type)](back, reading, out_grads)
        added = [
            _added(back, grads, name, grad) if grad is not None and name in on_path else None
            for name, grad in zip(node.input, in_grads, strict=False)
        ]
        segments.rule_done(node, reading, added)

    outputs = [declared[loss]]
    for name in wrt:
        source = back.total(grads[name], name) if name in grads else back.zeros_like(name)
        back.nodes.append(helper.make_node("Identity", [source], [grad_name(name)]))
        outputs.append(helper.make_value_info(grad_name(name), back.value_type(name)))

    # The backward nodes the gradients need; the forward values the loss or they read, and
    # everything those depend on.
    backward = back.pruned([grad_name(name) for name in wrt])
    read = {i for n in backward for i in n.input if i}
    needed = depends_on(graph, [loss, *read])
    result = helper.make_graph(
        [n for n in graph.node if any(o in needed for o in n.output)] + backward,
        graph.name + "_training",
        list(graph.input)
        + ([helper.make_tensor_value_info(loss_scale, onnx.TensorProto.FLOAT, [])] if loss_scale else []),
        outputs,
        initializer=list(graph.initializer) + [i for i in back.initializers if i.name in read],
    )
    trained = helper.make_model(
        result,
        opset_imports=list(model.opset_import),
        ir_version=model.ir_version,
        functions=[f for f in model.functions if f.domain != DOMAIN],
    )
    trained.metadata_props.add(
        key=MEMORY_OPTIONS, value=memory_options(recompute, recompute_layers, loss_chunk_size)
    )
    attach_functions(trained)
    onnx.checker.check_model(trained)
    return onnx.shape_inference.infer_shapes(trained, strict_mode=True)
