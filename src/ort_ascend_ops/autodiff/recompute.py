"""Activation recompute (gradient checkpointing) for the differentiator: the forward nodes of a
segment (a decoder layer, a chunk of the loss) computed again in the backward, just before the
segment's gradients, so that the forward's copies of their outputs die with the forward.

A segment's backward reads its recomputed values, not the forward's. Which nodes are recomputed:
those of the segment whose outputs depend on the data (the model's inputs that are not
parameters), so a weight's transpose or cast is kept; never a random op (its draw is not ours to
replay); in ``"selective"`` mode not the products either (MatMul, attention: the expensive ones),
whose outputs the forward keeps. Our kernels and ONNX Runtime's are deterministic, so the
recomputed values are the forward's, bit for bit.

ONNX Runtime runs a node once its inputs exist, in an order of its own: a recomputed segment whose
inputs all come from the forward could run at the start of the backward, all layers at once. So
each segment's first nodes read a value of the forward through ``Where(c, v, v)``, where ``c``
comes from a gradient the backward computed just before the segment (the previous segment's
last): ``v`` exactly, whatever ``c``, but not before that gradient exists."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

import onnx
from onnx import TensorProto

from ..domain import DOMAIN
from .graph import Backward, GradientError, Grads

MODES = ("none", "selective", "full")
# The module scopes torch.onnx.export (dynamo) records per node, outermost first.
SCOPES = "pkg.torch.onnx.name_scopes"
# The segment a node of a chunked loss belongs to (``chunked_loss`` sets it).
SEGMENT = "ort_ascend_ops.recompute_segment"
# The training model's record of the options that chose what its backward keeps.
MEMORY_OPTIONS = "ort_ascend_ops.memory_options"
_NUMBERED = re.compile(r"^(.+)\.(\d+)$")  # a module of a ModuleList: "model.layers.3"
_RANDOM = {"Dropout", "RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli"}
_RANDOM |= {"Multinomial"}
# What "selective" keeps from the forward: the GEMMs and attention, whose outputs are cheap to
# keep for what they cost to compute (docs/PERFORMANCE.md, activation recompute).
PRODUCTS = {
    *(("", op) for op in ("MatMul", "Gemm", "Einsum", "Conv", "ConvTranspose")),
    (DOMAIN, "FlashAttentionScore"),
    (DOMAIN, "LightningIndexer"),
    (DOMAIN, "GroupedMatmul"),
}
# Their outputs depend on the input's shape alone, which the recomputed input has too.
_SHAPE_OPS = {"Shape", "Size"}
_UNKNOWN_DIM = 2**20  # what a symbolic dim counts as when choosing the smallest value to wait on


def memory_options(recompute: str, layers: int | None, loss_chunk_size: int | None) -> str:
    """How a training model records its build's ``recompute``, ``recompute_layers`` and
    ``loss_chunk_size``."""
    return f"recompute={recompute} recompute_layers={layers} loss_chunk_size={loss_chunk_size}"


def recorded_memory_options(model: onnx.ModelProto) -> str:
    """``memory_options`` as ``model`` records them (a model from before the record: the
    defaults)."""
    found = next((p.value for p in model.metadata_props if p.key == MEMORY_OPTIONS), None)
    return found or memory_options("none", None, None)


def _key(node: onnx.NodeProto) -> str:
    return next(o for o in node.output if o)


def _layer_scope(node: onnx.NodeProto) -> str | None:
    """The outermost numbered module scope of the node ("model.layers.3"), "" for a node torch
    recorded outside any, None for a node without a record (built by a pass)."""
    for prop in node.metadata_props:
        if prop.key == SCOPES:
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                return None
            return next((s for s in scopes if isinstance(s, str) and _NUMBERED.match(s)), "")
    return None


def find_layers(graph: onnx.GraphProto) -> dict[str, str]:
    """Each node (by its first output) of a decoder layer, and the layer's scope: the numbered
    modules of the ModuleList with the most of them ("model.layers.N", GPT-2's
    "transformer.h.N"). A node without a record takes the layer of its producers when they agree
    on one (a pass's node inside a layer). A graph without records (its metadata stripped) is
    cut at its residual stream instead (``residual_blocks``)."""
    recorded = {_key(n): _layer_scope(n) for n in graph.node if any(n.output)}
    lists: dict[str, set[str]] = {}
    for numbered in filter(None, recorded.values()):
        match = _NUMBERED.match(numbered)
        assert match is not None
        lists.setdefault(match.group(1), set()).add(numbered)
    if not lists:
        return residual_blocks(graph)
    layers = max(lists.values(), key=len)
    producer_layer: dict[str, str] = {}
    found: dict[str, str] = {}
    for node in graph.node:
        if not any(node.output):
            continue
        scope = recorded[_key(node)]
        if scope is None:
            around = {producer_layer[i] for i in node.input if i in producer_layer}
            scope = around.pop() if len(around) == 1 else None
        if scope is not None and scope in layers:
            found[_key(node)] = scope
            producer_layer.update((o, scope) for o in node.output if o)
    return found


def residual_blocks(graph: onnx.GraphProto) -> dict[str, str]:
    """Each node between two consecutive Adds of the residual stream (the longest chain of Adds
    each reading the one before: x + attention(x), then + mlp(...)), and its block ("residual
    block N"): what computes the second Add from the first's output. Every sublayer but the
    first is a block."""
    adds = [n for n in graph.node if n.op_type == "Add" and n.domain in ("", "ai.onnx") and n.output[0]]
    by_output = {n.output[0]: n for n in adds}
    longest: dict[str, list[onnx.NodeProto]] = {}
    for node in adds:  # topological order: a chain's earlier Adds come first
        before = [longest[i] for i in node.input if i in by_output]
        longest[node.output[0]] = max(before, key=len, default=[]) + [node]
    chain = max(longest.values(), key=len, default=[])
    if len(chain) < 2:
        return {}
    producer = {o: n for n in graph.node for o in n.output if o}
    found: dict[str, str] = {}
    for index, (start, end) in enumerate(zip(chain, chain[1:], strict=False)):
        after = {start.output[0]}
        for node in graph.node:
            if any(i in after for i in node.input):
                after.update(o for o in node.output if o)
        stack, seen = [end.output[0]], set()
        while stack:
            value = stack.pop()
            if value in seen or value not in after or value == start.output[0]:
                continue
            seen.add(value)
            found[_key(producer[value])] = f"residual block {index}"
            stack.extend(i for i in producer[value].input if i)
    return found


def data_dependent(graph: onnx.GraphProto, parameters: set[str]) -> set[str]:
    """The values computed from the model's inputs that are not parameters, through any op but
    Shape and Size."""
    reached = {i.name for i in graph.input if i.name not in parameters}
    for node in graph.node:
        if node.op_type in _SHAPE_OPS and node.domain in ("", "ai.onnx"):
            continue
        if any(i in reached for i in node.input):
            reached.update(o for o in node.output if o)
    return reached


class Recompute:
    """The segments of ``graph`` (the prepared forward) to recompute under ``mode``: its decoder
    layers (the first ``layers`` of them; None: all) and the chunks of a chunked loss (always
    whole: their logits are what chunking frees). The differentiator asks ``node_for_rule`` for
    the node a rule should read, in the backward's order."""

    def __init__(self, graph: onnx.GraphProto, mode: str, layers: int | None, parameters: Sequence[str]):
        if mode not in MODES:
            raise ValueError(f"recompute must be one of {list(MODES)}, got {mode!r}")
        if layers is not None and (isinstance(layers, bool) or not isinstance(layers, int) or layers < 0):
            raise ValueError(f"recompute_layers must be None (all) or an integer >= 0, got {layers!r}")
        segment: dict[str, tuple[str, str]] = {}  # node key -> (segment, mode)
        if mode != "none":
            found = find_layers(graph)
            order = list(dict.fromkeys(found.values()))
            if not order:
                raise GradientError(
                    f"recompute={mode!r}: no decoder layer found: no node carries a module scope of a "
                    f"ModuleList ('model.layers.N', as torch.onnx.export records it in the nodes' "
                    f"'{SCOPES}' metadata), and no chain of two or more residual Adds (each reading "
                    f"the one before) cuts the graph into blocks; export the model with "
                    f"torch.onnx.export(dynamo=True) (export_torch), or train with recompute='none'"
                )
            if layers is not None and layers > len(order):
                raise ValueError(
                    f"recompute_layers={layers}: the model has {len(order)} decoder layers ({order[0]} ...)"
                )
            chosen = set(order[:layers] if layers is not None else order)
            segment = {k: (s, mode) for k, s in found.items() if s in chosen}
        for node in graph.node:
            chunk = next((p.value for p in node.metadata_props if p.key == SEGMENT), None)
            if chunk is not None:
                segment[_key(node)] = (chunk, "full")
        data = data_dependent(graph, set(parameters))
        self._members: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            key = _key(node) if any(node.output) else None
            if key in segment and self._recomputed(node, data, segment[key][1]):
                self._members.setdefault(segment[key][0], []).append(node)
        self._segment = {_key(n): s for s, nodes in self._members.items() for n in nodes}
        self._segment.update((k, s) for k, (s, _) in segment.items() if s in self._members)
        self._produced: dict[str, set[str]] = {}  # a segment -> the forward values it computes
        for node in graph.node:
            if any(node.output) and _key(node) in self._segment:
                self._produced.setdefault(self._segment[_key(node)], set()).update(
                    o for o in node.output if o
                )
        self._clones: dict[str, onnx.NodeProto] = {}  # a recomputed node's key -> its copy
        self._renamed: dict[str, str] = {}  # forward value -> its recomputed copy
        self._current: str | None = None
        self._done: set[str] = set()
        self._leaving: list[str] = []  # the current segment's gradients of values it reads

    @staticmethod
    def _recomputed(node: onnx.NodeProto, data: set[str], mode: str) -> bool:
        if not any(o in data for o in node.output) or node.op_type in _RANDOM:
            return False
        return mode == "full" or (node.domain or "", node.op_type) not in PRODUCTS

    def node_for_rule(self, back: Backward, node: onnx.NodeProto, grads: Grads) -> onnx.NodeProto:
        """The node the rule of forward ``node`` reads: its recomputed copy, or the node reading
        the recomputed copies of its inputs (a kept product); ``node`` itself outside segments.
        The first node of a segment reached recomputes the segment, after ``grads``."""
        segment = self._segment.get(_key(node))
        if segment is not None and segment != self._current and segment not in self._done:
            # After the gradient reaching the segment and every gradient the previous segment
            # gave its inputs and weights (the chunks of a loss all get theirs from the loss at
            # once; a chunk's input gradient, left alone, could wait for the last chunk's).
            after = [next(g for g in grads if g is not None), *self._leaving]
            self._recompute(back, segment, after)
            self._done.add(segment)
            self._current, self._leaving = segment, []
        if _key(node) in self._clones:
            return self._clones[_key(node)]
        if not any(i in self._renamed for i in node.input):
            return node
        reading = onnx.NodeProto()
        reading.CopyFrom(node)
        reading.input[:] = [self._renamed.get(i, i) for i in node.input]
        return reading

    def rule_done(self, node: onnx.NodeProto, read: onnx.NodeProto, input_grads: Grads) -> None:
        """After the rule: outputs it exposed on a kept node's reading copy (a saved statistic)
        are the forward node's; the gradients it gave values from outside its segment are what
        the next segment waits for."""
        if read is not node and _key(node) not in self._clones:
            node.output[:] = read.output
        current = self._current
        if current is not None and self._segment.get(_key(node)) == current:
            produced = self._produced[current]
            self._leaving += [
                g
                for i, g in zip(node.input, input_grads, strict=False)
                if g is not None and i not in produced
            ]

    def _recompute(self, back: Backward, segment: str, after: list[str]) -> None:
        condition: str | None = None
        waiting: dict[str, str] = {}
        for node in self._members[segment]:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copy.name = back.fresh(f"{node.name or _key(node)}/recomputed", suffix="")
            copy.input[:] = [self._renamed.get(i, i) for i in node.input]
            if not any(i in self._renamed for i in node.input if i):
                if condition is None:
                    condition = _condition(back, after)
                # Not a constant: rules read those (a Pow's exponent, a Reshape's shape).
                value = _smallest(back, [i for i in node.input if i and back.constant(i) is None])
                if value is not None:
                    if value not in waiting:
                        waiting[value] = back.op("Where", condition, value, value, hint=f"{value}/after")
                        back.recomputed(waiting[value], value)
                    copy.input[:] = [waiting[value] if i == value else i for i in copy.input]
            for index, name in enumerate(node.output):
                if name:
                    self._renamed[name] = copy.output[index] = back.fresh(f"{name}/recomputed", suffix="")
                    back.recomputed(copy.output[index], name)
            back.nodes.append(copy)
            self._clones[_key(node)] = copy


def _condition(back: Backward, grads: list[str]) -> str:
    """A boolean scalar computed from the first element of each of ``grads`` (an empty one has
    none)."""
    firsts = []
    for grad in grads:
        flat = back.op("Reshape", grad, back.const([-1]), hint="gate")
        first = back.op("Slice", flat, back.const([0]), back.const([1]), hint="gate")
        firsts.append(back.op("Cast", first, to=TensorProto.FLOAT, hint="gate"))
    joined = firsts[0] if len(firsts) == 1 else back.op("Concat", *firsts, axis=0, hint="gate")
    return back.op(
        "Cast", back.op("ReduceSum", joined, keepdims=0, hint="gate"), to=TensorProto.BOOL, hint="gate"
    )


def _smallest(back: Backward, names: list[str]) -> str | None:
    """The input to make wait: a floating-point one (they live on the device), the smallest."""

    def size(name: str) -> int:
        dims = back.dims(name)
        if dims is None:
            return _UNKNOWN_DIM**4
        total = 1
        for d in dims:
            total *= d if isinstance(d, int) else _UNKNOWN_DIM
        return total

    floats = [n for n in names if back.known_elem_type(n) in _FLOATING]
    return min(floats or names, key=size, default=None)


_FLOATING = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}
