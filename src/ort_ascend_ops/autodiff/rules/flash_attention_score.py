"""Rules of the FlashAttentionScore family."""

from __future__ import annotations

import onnx
from onnx import helper

from ..graph import Backward, GradientError, Grads, node_label
from .grad_nodes import forward_output, grad_node


def flash_attention_score(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """FlashAttentionScore(query, key, value, [atten_mask], [lengths]) -> attention_out,
    softmax_max, softmax_sum: FlashAttentionScoreGrad with the forward's statistics and output,
    which the forward computed anyway, so the backward recomputes the probabilities tile by tile
    instead of storing them. The statistics are saved for the backward, not a model's values: a
    gradient reaching them is refused rather than dropped."""
    for index, grad in enumerate(grads[1:3], start=1):
        if grad is not None:
            raise GradientError(
                f"{node_label(node)}: the loss depends on output {index} ('{node.output[index]}'), "
                "a softmax statistic, which FlashAttentionScoreGrad does not differentiate"
            )
    dy = grads[0] if grads else None
    if dy is None:
        return [None] * len(node.input)
    query, key, value = node.input[:3]
    optional = list(node.input[3:]) + [""] * (6 - len(node.input))
    mask, lengths = optional[0], optional[1:3]
    stats = [forward_output(b, node, i, hint) for i, hint in ((1, "softmax_max"), (2, "softmax_sum"))]
    inputs = [query, key, value, dy, mask, *stats, node.output[0], *lengths]
    while inputs and not inputs[-1]:
        inputs.pop()
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    dq, dk, dv = grad_node(b, "FlashAttentionScoreGrad", inputs, [query, key, value], 3, **attrs)
    return [dq, dk, dv] + [None] * (len(node.input) - 3)
