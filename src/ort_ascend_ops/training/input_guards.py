"""Guards on the integer inputs torch checks and ONNX does not: an embedding's token ids (ONNX's
Gather takes -1 as the last row, where ``torch.nn.functional.embedding`` raises) and a loss's class
labels (ONNX Runtime's SoftmaxCrossEntropyLoss takes a label of -5 and computes something, where
``torch.nn.functional.cross_entropy`` raises). Each guard is the portable path's ``Check``
(``reference/checks.py``) said in nodes: the guarded tensor picked out of a batch of one at
index 0 when the rule holds and at index 1, out of bounds, when it is broken, the node named after
the rule, so that every engine fails there with the rule in its message."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..bfloat16 import namer

# Ops that carry an integer tensor's values on unchanged (the exporter's reshapes and shifts of
# labels), traced back to name the graph input a guarded value comes from.
_CARRIERS = frozenset(
    {"Cast", "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Pad", "Concat"}
)
_LOSSES = frozenset({"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})


def _source(graph: onnx.GraphProto, name: str) -> str:
    """The graph input ``name`` carries (through ``_CARRIERS``), or ``name`` itself."""
    producers = {o: n for n in graph.node for o in n.output}
    inputs = {i.name for i in graph.input}
    seen = name
    while seen not in inputs and seen in producers and producers[seen].op_type in _CARRIERS:
        seen = producers[seen].input[0]
    return seen if seen in inputs else name


class _Guards:
    def __init__(self, model: onnx.ModelProto):
        self.graph = model.graph
        self.fresh = namer(model)
        self.nodes: list[onnx.NodeProto] = []

    def const(self, value, name: str) -> str:
        out = self.fresh(name)
        self.graph.initializer.append(numpy_helper.from_array(np.array(value, np.int64), out))
        return out

    def op(self, op_type: str, *inputs: str, name: str | None = None, **attrs) -> str:
        out = self.fresh(f"guard/{op_type}")
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [out], name=name or self.fresh(out), **attrs)
        )
        return out

    def guard(self, value: str, ok: str, rule: str) -> str:
        """``value`` once ``ok`` holds (see the module's doc)."""
        batch = self.op("Unsqueeze", value, self.const([0], "guard/axis"))
        index = self.op("Where", ok, self.const(0, "guard/zero"), self.const(1, "guard/one"))
        return self.op("Gather", batch, index, name=self.fresh(rule), axis=0)

    def none_outside(self, value: str, high: str, ignored: int | None = None) -> str:
        """Whether every element of ``value`` lies in [0, high) or equals ``ignored`` (an empty
        tensor holds none outside)."""
        values = self.op("Cast", value, to=TensorProto.INT64)
        outside = self.op(
            "Or",
            self.op("Less", values, self.const(0, "guard/zero")),
            self.op("GreaterOrEqual", values, high),
        )
        if ignored is not None:
            kept = self.op("Not", self.op("Equal", values, self.const(ignored, "guard/ignored")))
            outside = self.op("And", outside, kept)
        count = self.op("ReduceSum", self.op("Cast", outside, to=TensorProto.INT64), keepdims=0)
        return self.op("Equal", count, self.const(0, "guard/zero"))


def guard_inputs(model: onnx.ModelProto, parameters: Collection[str]) -> onnx.ModelProto:
    """``model`` (changed in place, and returned) with guards before each Gather of a parameter
    along axis 0 at indices that come from a graph input (an embedding), and before each loss's
    labels: token ids must lie in [0, rows), labels in [0, classes) or equal the ignore index."""
    graph = model.graph
    guards = _Guards(model)
    shapes = {i.name: list(i.type.tensor_type.shape.dim) for i in graph.input}
    inputs = {i.name: i.type.tensor_type.elem_type for i in graph.input}
    integers = (TensorProto.INT64, TensorProto.INT32)
    nodes = []
    for node in graph.node:
        guards.nodes = []
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        standard = node.domain in ("", "ai.onnx")
        if standard and node.op_type == "Gather" and node.input[0] in parameters and axis == 0:
            source = _source(graph, node.input[1])
            if inputs.get(source) in integers:
                dim = shapes[node.input[0]][0]
                rows = dim.dim_value if dim.HasField("dim_value") else None
                high = (
                    guards.const(rows, "guard/rows")
                    if rows
                    else guards.op("Shape", node.input[0], start=0, end=1)
                )
                rule = (
                    f"input '{source}' must hold token ids in [0, {rows or 'rows'}): the rows of the embedding "
                    f"'{node.input[0]}' (torch's embedding refuses others; ONNX's Gather would take -1 as the last row)"
                )
                node.input[1] = guards.guard(node.input[1], guards.none_outside(node.input[1], high), rule)
        elif standard and node.op_type in _LOSSES:
            ignored = next((a.i for a in node.attribute if a.name == "ignore_index"), None)
            classes = guards.op("Shape", node.input[0], start=1, end=2)
            said = f" or be {ignored} (ignored)" if ignored is not None else ""
            rule = (
                f"the labels of {node.op_type} '{node.name or node.output[0]}' (from '{_source(graph, node.input[1])}') "
                f"must lie in [0, classes){said}, as torch's cross_entropy requires"
            )
            node.input[1] = guards.guard(
                node.input[1], guards.none_outside(node.input[1], classes, ignored), rule
            )
        nodes += [*guards.nodes, node]  # each guard right before the node it guards
    del graph.node[:]
    graph.node.extend(nodes)
    return model
