"""BatchNormalization's rule, per channel (axis 1), in both modes: training mode normalizes by the
batch's statistics (biased variance, as the op and torch's ``batch_norm(training=True)`` compute
it), inference mode by the running statistics it is given. Sums run in float32 for float16 and
bfloat16 inputs."""

from __future__ import annotations

import onnx

from ..graph import Backward, GradientError, Grads, attribute, first_grad, node_label


def batch_normalization(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    if any(g is not None for g in grads[1:]):
        raise GradientError(f"{node_label(node)}: its running statistics outputs are not differentiable")
    x, scale, bias, mean, var = node.input
    acc = b.accumulation_type(x)
    rank = b.rank(x)
    axes = b.const([0, *range(2, rank)])  # every axis but the channels'
    per_channel = b.const([1, -1] + [1] * (rank - 2))

    def cast(name: str) -> str:
        return b.convert(name, b.elem_type(name), acc)

    def channels(name: str) -> str:  # a [C] input shaped to broadcast over x
        return b.op("Reshape", cast(name), per_channel)

    def batch_mean(value: str) -> str:
        return b.op("ReduceMean", value, axes, keepdims=1)

    def channel_sum(value: str) -> str:  # [C]
        return b.op("ReduceSum", value, axes, keepdims=0)

    def back(value: str, like: str) -> str:
        return b.convert(value, acc, b.elem_type(like))

    g = b.convert(first_grad(grads), b.elem_type(node.output[0]), acc)  # typed as the output
    xf = cast(x)
    training = bool(attribute(node, "training_mode", 0))
    if training:
        centered = b.op("Sub", xf, batch_mean(xf))
        variance = batch_mean(b.op("Mul", centered, centered))
    else:
        centered, variance = b.op("Sub", xf, channels(mean)), channels(var)
    epsilon = b.const(attribute(node, "epsilon", 1e-5), acc, hint="epsilon")
    inv_std = b.op("Reciprocal", b.op("Sqrt", b.op("Add", variance, epsilon)))
    normalized = b.op("Mul", centered, inv_std)
    g_normalized = b.op("Mul", g, normalized)
    result: Grads = [None] * len(node.input)
    if b.needs(x):
        slope, g_x = b.op("Mul", channels(scale), inv_std), g
        if training:  # the batch statistics depend on x: g less its mean and its projection on x̂
            g_x = b.op(
                "Sub", b.op("Sub", g, batch_mean(g)), b.op("Mul", normalized, batch_mean(g_normalized))
            )
        result[0] = back(b.op("Mul", g_x, slope), x)
    if b.needs(scale):
        result[1] = back(channel_sum(g_normalized), scale)
    if b.needs(bias):
        result[2] = back(channel_sum(g), bias)
    if not training and (b.needs(mean) or b.needs(var)):
        # y = scale (x - mean) / sqrt(var + eps) + bias: dy/dmean = -scale inv_std and
        # dy/dvar = -scale (x - mean) / (2 (var + eps)^(3/2)) = -scale x̂ inv_std² / 2.
        scale_f, flat_inv_std = cast(scale), b.op("Reshape", inv_std, b.const([-1]))
        if b.needs(mean):
            slope_mean = b.op("Neg", b.op("Mul", scale_f, flat_inv_std))
            result[3] = back(b.op("Mul", channel_sum(g), slope_mean), mean)
        if b.needs(var):
            half = b.const(-0.5, acc, hint="half")
            slope_var = b.op("Mul", b.op("Mul", scale_f, half), b.op("Mul", flat_inv_std, flat_inv_std))
            result[4] = back(b.op("Mul", channel_sum(g_normalized), slope_var), var)
    return result
