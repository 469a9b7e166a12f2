"""Rules for MaxPool, AveragePool and GlobalAveragePool. Sums run in float32 for float16 and
bfloat16 inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from ..graph import Backward, GradientError, Grads, attribute, first_grad, node_label
from .conv import conv_geometry, static_sizes
from .grad_nodes import forward_output


def max_pool(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """Each window's gradient goes to the element its max came from: the forward's Indices
    output (flat indices into x, the first of tied maxima in scan order, as torch picks), added
    up where windows overlap."""
    if attribute(node, "storage_order", 0) != 0:
        raise GradientError(f"{node_label(node)}: no gradient for storage_order 1 (column-major indices)")
    x = node.input[0]
    acc = b.accumulation_type(x)
    g = b.convert(first_grad(grads), b.elem_type(node.output[0]), acc)
    flat = b.const([-1])
    indices = b.op("Reshape", forward_output(b, node, 1, "indices"), flat)
    zeros = b.op("Reshape", b.zeros_like(x, acc), flat)
    spread = b.op("ScatterElements", zeros, indices, b.op("Reshape", g, flat), axis=0, reduction="add")
    return [b.convert(b.reshape_like(spread, x), acc, b.elem_type(x))]


def average_pool(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """Each window's gradient over its elements, divided as the forward divided it: by
    AveragePool of ones (whatever count_include_pad and ceil_mode make its divisor) over the
    count of x's elements in each window (a convolution of ones). Windows that ceil_mode adds
    past the padding are end pads of that convolution and of the transposed one spreading the
    gradient back, per (batch, channel) plane."""
    x = node.input[0]
    kernel = list(attribute(node, "kernel_shape"))
    strides, dilations, pads = conv_geometry(b, node, x, kernel)
    sizes = static_sizes(b, node, x, "its gradient")
    spatial = len(kernel)
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    outs = _pooled_sizes(b, node, sizes, spans, strides, pads)
    extra = [
        max(0, (out - 1) * s + span - (size + pads[i] + pads[i + spatial]))
        for i, (out, s, span, size) in enumerate(zip(outs, strides, spans, sizes, strict=True))
    ]
    acc = b.accumulation_type(x)
    ones = b.const(np.ones([1, 1, *sizes]), acc, hint="ones")
    window = b.const(np.ones([1, 1, *kernel]), acc, hint="window")
    reaching = pads[:spatial] + [p + e for p, e in zip(pads[spatial:], extra, strict=True)]
    geometry: dict[str, Any] = {"strides": strides, "dilations": dilations, "pads": reaching}
    counts = b.op("Conv", ones, window, **geometry)
    averaged = b.op(
        "AveragePool", ones, **{a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    )
    divided = b.op("Div", averaged, counts)  # 1 / the divisor of each window
    g = b.convert(first_grad(grads), b.elem_type(node.output[0]), acc)
    shares = b.op("Mul", b.op("Reshape", g, b.const([-1, 1, *outs])), divided)
    output_padding = [
        size - ((out - 1) * s + span - p - q - e)
        for size, out, s, span, p, q, e in zip(
            sizes, outs, strides, spans, pads[:spatial], pads[spatial:], extra, strict=True
        )
    ]
    spread = b.op("ConvTranspose", shares, window, output_padding=output_padding, **geometry)
    return [b.convert(b.reshape_like(spread, x), acc, b.elem_type(x))]


def _pooled_sizes(b: Backward, node: onnx.NodeProto, sizes, spans, strides, pads) -> list[int]:
    """The output's spatial sizes: as shape inference gives them (the opset's own ceil_mode rule),
    else by the newest rule (a last window starting in the end padding is dropped)."""
    inferred = b.shape(node.output[0])
    if inferred is not None and None not in inferred:
        return [int(d) for d in inferred[2:] if d is not None]
    outs, spatial = [], len(sizes)
    for i, (size, span, s) in enumerate(zip(sizes, spans, strides, strict=True)):
        room = size + pads[i] + pads[i + spatial] - span
        out = (-(-room // s) if attribute(node, "ceil_mode", 0) else room // s) + 1
        outs.append(out - 1 if (out - 1) * s >= size + pads[i] else out)
    return outs


def global_average_pool(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """g spread evenly over each plane."""
    x = node.input[0]
    acc = b.accumulation_type(x)
    g = b.convert(first_grad(grads), b.elem_type(node.output[0]), acc)
    plane = b.op("ReduceProd", b.op("Slice", b.shape_of(x), b.const([2]), b.const([2**62])), keepdims=0)
    spread = b.op("Div", b.op("Expand", g, b.shape_of(x)), b.op("Cast", plane, to=acc))
    return [b.convert(spread, acc, b.elem_type(x))]
