"""bfloat16 models on ONNX Runtime's CPU, which has bfloat16 kernels for casts and data movement
but for almost no arithmetic (MatMul, Add, Softmax, ... fail at session creation): the standard
ops it cannot run compute in float32 between casts, rounding each result to bfloat16 as PyTorch's
CPU does (``widen_bfloat16``). Our own ops run bfloat16 natively and are left alone."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator

import onnx
import onnx.inliner
from onnx import helper

from .domain import ACLNN_DOMAIN, DOMAIN
from .opschema import register_schemas

BFLOAT16 = onnx.TensorProto.BFLOAT16
FLOAT16 = onnx.TensorProto.FLOAT16
FLOAT = onnx.TensorProto.FLOAT

# The default-domain ops that ONNX Runtime's CPU runs with bfloat16 values and whose results do
# not depend on the precision they are computed in (casts, and ops that move, select or test
# values), each with the first opset from which ONNX's schema and ONNX Runtime's kernels both take
# bfloat16 (13 for most; tests/test_bfloat16.py probes ONNX Runtime for each). Its bfloat16
# kernels that do arithmetic (LayerNormalization; Einsum, Celu and Range at opset 28) are left out
# on purpose: widened, they round once from float32 like every other op. Expand, Tile, Where and
# Size have no bfloat16 kernel: widening them changes no value.
RUNS_IN_BFLOAT16: dict[str, int] = {
    "BitCast": 26,
    "Cast": 13,
    "CastLike": 15,  # an ONNX function, a Cast
    "Compress": 28,
    "Concat": 13,
    "Constant": 1,  # an initializer once loaded
    "ConstantOfShape": 9,
    "DepthToSpace": 28,
    "Flatten": 13,
    "Gather": 13,
    "GatherElements": 13,
    "GatherND": 13,
    "Identity": 13,
    "If": 1,
    "IsInf": 20,
    "IsNaN": 20,
    "Loop": 16,
    "OneHot": 28,
    "Pad": 21,
    "Reshape": 13,
    "ReverseSequence": 28,
    "Scan": 16,
    "ScatterElements": 13,
    "ScatterND": 13,
    "Shape": 13,
    "Sign": 13,
    "Slice": 13,
    "Split": 13,
    "Squeeze": 13,
    "TensorScatter": 24,
    "Transpose": 13,
    "Unique": 28,
    "Unsqueeze": 13,
}

# Attributes that name an output's element type (EyeLike's and the random ops' dtype, the window
# ops' output_datatype, DequantizeLinear's output_dtype): bfloat16 there becomes float32 when the
# node is widened.
_TYPE_ATTRIBUTES = ("dtype", "output_datatype", "output_dtype")

_NOT_A_TENSOR = -1  # the element type recorded for sequences, optionals and maps


def _runs_in_bfloat16(node: onnx.NodeProto, opset: int) -> bool:
    """Whether ONNX Runtime's CPU runs the default-domain ``node`` as it is at ``opset``. A scatter
    with a reduction adds or multiplies: ONNX Runtime refuses that for bfloat16 only as it runs,
    and widened it accumulates in float32, as PyTorch's scatter_add does."""
    since = RUNS_IN_BFLOAT16.get(node.op_type)
    reduction = next((a.s for a in node.attribute if a.name == "reduction"), b"none")
    return since is not None and opset >= since and reduction == b"none"


def node_graphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs ``node``'s attributes hold (If branches, Loop and Scan bodies)."""
    for attr in node.attribute:
        yield from [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph and, depth first, its subgraphs."""
    yield graph
    for node in graph.node:
        for sub in node_graphs(node):
            yield from _graphs(sub)


def _type_has(tp: onnx.TypeProto, elem: int) -> bool:
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        return getattr(tp, kind).elem_type == elem
    if kind in ("sequence_type", "optional_type"):
        return _type_has(getattr(tp, kind).elem_type, elem)
    return kind == "map_type" and _type_has(tp.map_type.value_type, elem)


def _attribute_has(attr: onnx.AttributeProto, elem: int) -> bool:
    """An integer attribute equal to ``elem`` may be a type (Cast's ``to``, a ``dtype``, or a
    function's attribute that a Cast in its body reads): it counts, and a false alarm (an axis
    of 16) costs only the type inference."""
    A = onnx.AttributeProto
    kind = attr.type
    if kind == A.INT:
        return attr.i == elem
    if kind == A.TENSOR:
        return attr.t.data_type == elem
    if kind == A.SPARSE_TENSOR:
        return attr.sparse_tensor.values.data_type == elem
    if kind == A.TYPE_PROTO:
        return _type_has(attr.tp, elem)
    if kind == A.GRAPH:
        return _graph_has(attr.g, elem)
    return kind == A.GRAPHS and any(_graph_has(g, elem) for g in attr.graphs)


def _nodes_have(nodes: Iterable[onnx.NodeProto], elem: int) -> bool:
    return any(_attribute_has(attr, elem) for node in nodes for attr in node.attribute)


def _graph_has(graph: onnx.GraphProto, elem: int) -> bool:
    return (
        any(_type_has(v.type, elem) for v in (*graph.input, *graph.output, *graph.value_info))
        or any(t.data_type == elem for t in graph.initializer)
        or any(s.values.data_type == elem for s in graph.sparse_initializer)
        or _nodes_have(graph.node, elem)
    )


def _mentions(model: onnx.ModelProto, elem: int) -> bool:
    """Whether ``elem`` appears anywhere a value could take it from: the graphs' declared types and
    initializers, and the attributes of the graphs' and functions' nodes. One walk, no tensor data
    read, no inference, so that float32 models pass the widening at little cost."""
    return _graph_has(model.graph, elem) or any(_nodes_have(f.node, elem) for f in model.functions)


def _inline_foreign_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` with its functions of other domains than ours inlined, so that their
    nodes get the types of their call sites (ONNX Runtime inlines them anyway). Ours stay: the
    native kernels replace them, and their bodies compute in float32 already (those of the NPU's
    standard ops too: their kernels take the low types)."""
    if all(f.domain in (DOMAIN, ACLNN_DOMAIN) for f in model.functions):
        return copy.deepcopy(model)
    ours = [(f.domain, f.name) for f in model.functions if f.domain in (DOMAIN, ACLNN_DOMAIN)]
    return onnx.inliner.inline_selected_functions(model, ours, exclude=True)


def _value_types(model: onnx.ModelProto) -> dict[str, int]:
    """The element type of each value the graph and its subgraphs name (``_NOT_A_TENSOR`` for the
    other kinds), shape-inferred with our ops' schemas."""
    register_schemas()
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {}
    for graph in _graphs(inferred.graph):
        for value in (*graph.input, *graph.output, *graph.value_info):
            tensor = value.type.HasField("tensor_type")
            types[value.name] = value.type.tensor_type.elem_type if tensor else _NOT_A_TENSOR
        types |= {t.name: t.data_type for t in graph.initializer}
    return types


def namer(model: onnx.ModelProto) -> Callable[[str], str]:
    """A function giving names that no value or node of the model has, nor an earlier call gave."""
    used: set[str] = set()
    for graph in _graphs(model.graph):
        used.update(v.name for v in (*graph.input, *graph.initializer))
        used.update(name for node in graph.node for name in (node.name, *node.input, *node.output))

    def fresh(name: str) -> str:
        candidate, count = name, 0
        while candidate in used:
            count += 1
            candidate = f"{name}_{count}"
        used.add(candidate)
        return candidate

    return fresh


def _needs_widening(node: onnx.NodeProto, types: dict[str, int], opset: int) -> bool:
    """Whether ``node`` is a default-domain node ONNX Runtime's CPU cannot run as it is, with a
    bfloat16 tensor among its values."""
    if node.domain not in ("", "ai.onnx") or _runs_in_bfloat16(node, opset):
        return False
    return _castable_with(node, types, BFLOAT16)


def _castable_with(node: onnx.NodeProto, types: dict[str, int], elem: int) -> bool:
    """Whether an ``elem`` tensor is among ``node``'s values. A node with a sequence or optional
    value is left as it is: those cannot be cast."""
    kinds = [types.get(name) for name in (*node.input, *node.output) if name]
    return elem in kinds and _NOT_A_TENSOR not in kinds


def _cast(source: str, target: str, to: int, fresh: Callable[[str], str]) -> onnx.NodeProto:
    return helper.make_node("Cast", [source], [target], name=fresh(f"{target}_cast"), to=to)


def _widen(
    node: onnx.NodeProto,
    types: dict[str, int],
    fresh: Callable[[str], str],
    copies: dict[str, str],
    elem: int,
) -> list[onnx.NodeProto]:
    """``node`` computing in float32: its ``elem`` inputs cast to float32 (once per value and graph:
    ``copies`` maps each to its float32 copy), its ``elem`` outputs cast back under their own
    names, so that every value keeps its type and each result is rounded, as PyTorch rounds each
    op's."""
    before, after = [], []
    for index, name in enumerate(node.input):
        if types.get(name) == elem:
            if name not in copies:
                copies[name] = fresh(f"{name}_as_float32")
                before.append(_cast(name, copies[name], FLOAT, fresh))
            node.input[index] = copies[name]
    for index, name in enumerate(node.output):
        if types.get(name) == elem:
            node.output[index] = fresh(f"{name}_float32")
            after.append(_cast(node.output[index], name, elem, fresh))
    for attr in node.attribute:
        if attr.name in _TYPE_ATTRIBUTES and attr.i == elem:
            attr.i = FLOAT
    return [*before, node, *after]


def _widen_graph(
    graph: onnx.GraphProto,
    types: dict[str, int],
    fresh: Callable[[str], str],
    elem: int,
    needs: Callable[[onnx.NodeProto], bool],
) -> bool:
    """Widens, in place, the nodes of ``graph`` and of its subgraphs that ``needs``; whether any
    did."""
    nodes: list[onnx.NodeProto] = []
    copies: dict[str, str] = {}
    in_subgraphs = False
    for node in graph.node:
        for sub in node_graphs(node):
            in_subgraphs |= _widen_graph(sub, types, fresh, elem, needs)
        nodes.extend(_widen(node, types, fresh, copies, elem) if needs(node) else [node])
    here = len(nodes) > len(graph.node)  # a widened node comes with a cast at least
    if here:
        del graph.node[:]
        graph.node.extend(nodes)
    return here or in_subgraphs


def widen_bfloat16(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` made runnable on ONNX Runtime's CPU: each default-domain node that it has no
    bfloat16 kernel for (see ``RUNS_IN_BFLOAT16``) gets its bfloat16 inputs cast to float32,
    computes in float32, and has its bfloat16 outputs cast back under their names, in the graph,
    its subgraphs and its functions of other domains (inlined). Every value keeps its type, and
    each op's result is rounded to bfloat16 as PyTorch rounds it on the CPU (a MatMul accumulates
    in float32 and rounds once). Nodes of our domain keep bfloat16: their kernels take it.
    Returns ``model`` itself when nothing needs widening (no bfloat16 anywhere: found without
    inference) or when type inference fails, else a widened copy."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        return model
    return _widened(model, BFLOAT16, lambda node, types: _needs_widening(node, types, opset))


def widen_float16_products(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each default-domain MatMul of float16 values computing in float32 between
    casts, as ``widen_bfloat16`` widens (``model`` itself when it has none). ONNX Runtime's CPU
    float16 MatMul splits a long inner product across its threads, so that its result changes
    with the thread count (an ulp apart at 1 and 2 threads for [64, K] x [K, 128]); float32's does
    not, and the one rounding of a float32 sum is what PyTorch's float16 matmul gives."""
    return _widened(
        model,
        FLOAT16,
        lambda node, types: (
            node.domain in ("", "ai.onnx")
            and node.op_type == "MatMul"
            and _castable_with(node, types, FLOAT16)
        ),
    )


def _widened(model: onnx.ModelProto, elem: int, needs: Callable[[onnx.NodeProto, dict], bool]):
    """A copy of ``model`` (its foreign functions inlined) whose nodes that ``needs`` compute in
    float32 between casts from and to ``elem``; ``model`` itself when none does or when type
    inference fails."""
    if not _mentions(model, elem):
        return model
    widened = _inline_foreign_functions(model)
    try:
        types = _value_types(widened)
    except onnx.shape_inference.InferenceError:
        return model  # one that ONNX Runtime refuses too, naming the error
    changed = _widen_graph(widened.graph, types, namer(widened), elem, lambda node: needs(node, types))
    return widened if changed else model
