"""Rules of the LightningIndexer family."""

from __future__ import annotations

import onnx

from ...opschema import default
from ..graph import Backward, GradientError, Grads, attribute, node_label
from .grad_nodes import forward_output, grad_node


def lightning_indexer(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """LightningIndexer(query, key, weights, [lengths]) -> sparse_indices, sparse_values:
    LightningIndexerGrad on the selected values. The indices are a discrete choice: no gradient
    flows through them, and the backward reuses them so that it differentiates the same selection."""
    dy = grads[1] if len(grads) > 1 else None
    if dy is None:  # only the int32 indices reach the loss
        return [None] * len(node.input)
    query, key, weights = node.input[:3]
    shape = b.shape(query)
    head_num = shape[-2] if shape else None
    if head_num is None:
        raise GradientError(
            f"{node_label(node)}: LightningIndexerGrad needs head_num, but the head axis of "
            f"query '{query}' has no static size"
        )
    indices = forward_output(b, node, 0, "sparse_indices")
    layout = attribute(node, "layout", default("LightningIndexer", "layout", str))
    sparse_mode = attribute(node, "sparse_mode", default("LightningIndexer", "sparse_mode", int))
    inputs = [query, key, dy, indices, weights, *node.input[3:]]
    d_query, d_key, d_weights = grad_node(
        b,
        "LightningIndexerGrad",
        inputs,
        [query, key, weights],
        3,
        head_num=head_num,
        layout=layout,
        sparse_mode=sparse_mode,
    )
    return [d_query, d_key, d_weights] + [None] * (len(node.input) - 3)
