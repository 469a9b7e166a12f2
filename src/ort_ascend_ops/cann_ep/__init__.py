"""Graphs for onnxruntime-cann's execution provider: what a session made for the NPU runs instead
of the model it is given, the same computation specialized to its input shapes
(``static_shapes``), with every node that touches tensor data on the device (``aclnn_ops``), and
no broadcasting left to the EP's own faulty kernels (``broadcast_guard``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx

from .aclnn_ops import STANDARD_OPS, to_aclnn_domain
from .broadcast_guard import expand_broadcast_operands
from .static_shapes import with_static_shapes

__all__ = ["STANDARD_OPS", "for_cann_ep", "with_static_shapes"]


def for_cann_ep(
    model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> onnx.ModelProto:
    """``model`` as the CANN EP runs it: fixed to ``input_shapes`` with its shape arithmetic
    folded when they are given (``{}``: the shapes the model has), its standard ops in ``ACLNN_DOMAIN`` (native aclnn kernels), the
    few left standard guarded against the EP's broadcasting fault."""
    if input_shapes is not None:
        model = _named_required_outputs(with_static_shapes(model, input_shapes))
    return expand_broadcast_operands(to_aclnn_domain(model))


def _named_required_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with a name for each output of our ops that its schema requires and the folding
    left unnamed, unused (ONNX Runtime refuses a node that omits a required output)."""
    from ..domain import DOMAIN
    from ..opschema import load_op_specs

    specs = load_op_specs()
    for k, node in enumerate(model.graph.node):
        spec = specs.get(node.op_type) if node.domain == DOMAIN else None
        if spec is None:
            continue
        for i, name in enumerate(node.output):
            if not name and not spec.outputs[i].optional:
                node.output[i] = f"{node.name or node.op_type}_{k}_unused_{spec.outputs[i].name}"
    return model
