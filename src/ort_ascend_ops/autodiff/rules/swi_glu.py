"""SwiGlu's rule: SwiGluGrad, which recomputes the gate from the x the forward read, so the
training graph keeps x alone."""

from __future__ import annotations

import onnx

from ...opschema import default
from ..graph import Backward, Grads, attribute, first_grad
from .grad_nodes import grad_node


def swi_glu(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    (x,) = node.input
    dim = attribute(node, "dim", default("SwiGlu", "dim", int))
    (dx,) = grad_node(b, "SwiGluGrad", [first_grad(grads), x], [x], 1, dim=dim)
    return [dx]
