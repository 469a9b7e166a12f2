"""GroupedMatmul's rule, as the vendor's backward runs it: the input gradient is a GroupedMatmul of
dy by the transposed weights, the weight gradient a GroupedMatmulWeightGrad summing each expert's
rows; the counts have no gradient."""

from __future__ import annotations

import onnx

from ...opschema import default
from ..graph import Backward, Grads, attribute, first_grad
from .grad_nodes import grad_node


def grouped_matmul(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    x, weight, group_list = node.input
    transposed = attribute(node, "transpose_weight", default("GroupedMatmul", "transpose_weight", int))
    dy = first_grad(grads)
    dx = dweight = None
    if b.needs(x):
        (dx,) = grad_node(
            b, "GroupedMatmul", [dy, weight, group_list], [x], 1, transpose_weight=1 - transposed
        )
    if b.needs(weight):
        (dweight,) = grad_node(
            b, "GroupedMatmulWeightGrad", [x, dy, group_list], [weight], 1, transpose_weight=transposed
        )
    return [dx, dweight, None]
