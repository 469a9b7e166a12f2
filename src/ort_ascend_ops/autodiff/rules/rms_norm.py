"""Rules of the RmsNorm family: our RmsNorm, and the standard opset-23 ``RMSNormalization``,
which RmsNormGrad serves too."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from ...domain import DOMAIN
from ...fusion.rms_norm import RMS_NORMALIZATION_EPSILON
from ..graph import Backward, GradientError, Grads, attribute, first_grad, node_label
from .grad_nodes import forward_output, grad_node

# The element types our ops take (T in the contract).
_OUR_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16}


def rms_norm(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """RmsNorm(x, gamma) -> y, rstd: RmsNormGrad(dy, x, rstd, gamma) with the rstd the forward
    saved, so the backward does not recompute the mean square."""
    if len(grads) > 1 and grads[1] is not None:
        # Nothing in a decoder differentiates through rstd; say so rather than drop its gradient.
        raise GradientError(f"{node_label(node)}: the gradient through its rstd output is not supported")
    dy = first_grad(grads)
    x, gamma = node.input
    rstd = forward_output(b, node, 1, "rstd")
    dx, dgamma = grad_node(b, "RmsNormGrad", [dy, x, rstd, gamma], [x, gamma], 2)
    if b.needs(gamma) and b.elem_type(gamma) != TensorProto.FLOAT:
        # RmsNormGrad accumulates dgamma in float32 whatever gamma's type; the training model
        # promises each gradient in its value's type.
        dgamma = b.op("Cast", dgamma, to=b.elem_type(gamma), hint=gamma)
    return [dx if b.needs(x) else None, dgamma if b.needs(gamma) else None]


def rms_normalization(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """Standard RMSNormalization(X, scale): rewritten in place to our RmsNorm, which computes the
    same thing and also saves rstd, then differentiated as RmsNorm. The training model still runs
    on stock ONNX Runtime through the RmsNorm function it carries."""
    x, scale = node.input
    rank = b.rank(x)
    axis = attribute(node, "axis", -1)
    axis = axis + rank if axis < 0 else axis
    x_shape, scale_shape = b.ranked_shape(x), b.shape(scale)
    label = f"{node_label(node)} (gradient rule rms_normalization)"
    # RmsNorm normalizes over the trailing rank(gamma) axes and does not broadcast gamma: the
    # scale must span exactly the normalized axes X.shape[axis:].
    if scale_shape is None or len(scale_shape) != rank - axis:
        raise GradientError(
            f"{label}: scale '{scale}' must have shape X.shape[{axis}:] (rank {rank - axis}) to map "
            f"onto RmsNorm, got {'an unknown shape' if scale_shape is None else scale_shape}"
        )
    for s, d in zip(scale_shape, x_shape[axis:], strict=True):
        if s is not None and d is not None and s != d:
            raise GradientError(
                f"{label}: scale '{scale}' of shape {scale_shape} broadcasts to X.shape[{axis}:] = "
                f"{x_shape[axis:]}; RmsNorm needs them equal"
            )
    # RMSNormalization's Y has scale's type, RmsNorm's y has x's: they must agree.
    if b.elem_type(x) != b.elem_type(scale) or b.elem_type(x) not in _OUR_TYPES:
        raise GradientError(
            f"{label}: X and scale must share one of float32, float16, bfloat16 to map onto RmsNorm"
        )
    # RmsNorm computes in float32, which is stash_type 1 (the default).
    if attribute(node, "stash_type", 1) != TensorProto.FLOAT:
        raise GradientError(f"{label}: only stash_type 1 (float32) maps onto RmsNorm")
    epsilon = attribute(node, "epsilon", RMS_NORMALIZATION_EPSILON)  # always set: RmsNorm's differs
    node.op_type, node.domain = "RmsNorm", DOMAIN
    del node.attribute[:]
    node.attribute.append(helper.make_attribute("epsilon", epsilon))
    return rms_norm(b, node, grads)
