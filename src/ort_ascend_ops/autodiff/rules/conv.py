"""Conv's rule, at any rank and group (depthwise included). x's gradient is the transposed
convolution of g with the same weight; the weight's is a convolution of x by g with the roles of
batch and channels swapped (per group), stride and dilation trading places; the bias's is g
summed over all but the channels. Convolutions run in float32 for float16 and bfloat16 inputs."""

from __future__ import annotations

import onnx

from ..graph import Backward, GradientError, Grads, attribute, first_grad, node_label


def static_sizes(b: Backward, node: onnx.NodeProto, x: str, why: str) -> list[int]:
    """x's spatial sizes, which ``why`` needs known at build time."""
    sizes = [s for s in b.ranked_shape(x)[2:] if s is not None]
    if len(sizes) != b.rank(x) - 2:
        raise GradientError(f"{node_label(node)}: {why} needs its input's spatial sizes at build time")
    return sizes


def conv_geometry(b: Backward, node: onnx.NodeProto, x: str, kernel: list[int]) -> tuple[list[int], ...]:
    """Strides, dilations and explicit pads (begins then ends) of a Conv or pool node, auto_pad
    resolved (SAME_* from x's static sizes)."""
    spatial = len(kernel)
    strides = list(attribute(node, "strides", [1] * spatial))
    dilations = list(attribute(node, "dilations", [1] * spatial))
    pads = list(attribute(node, "pads", [0] * 2 * spatial))
    auto_pad = attribute(node, "auto_pad", "NOTSET")
    if auto_pad == "VALID":
        pads = [0] * 2 * spatial
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        sizes = static_sizes(b, node, x, f"auto_pad {auto_pad}")
        for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
            total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else large)
            ends.append(large if auto_pad == "SAME_UPPER" else small)
        pads = begins + ends
    elif auto_pad != "NOTSET":
        raise GradientError(f"{node_label(node)}: no gradient for auto_pad '{auto_pad}'")
    return strides, dilations, pads


def _remainders(b: Backward, node: onnx.NodeProto, x: str, kernel, strides, dilations, pads) -> list[int]:
    """Per spatial axis, how many of x's last positions lie past the last window's reach: the
    output_padding a transposed convolution needs to give back x's size. Strides of 1 leave
    none; others need x's static sizes."""
    spatial = len(kernel)
    if all(s == 1 for s in strides):
        return [0] * spatial
    sizes = static_sizes(b, node, x, f"strides {strides}")
    return [
        (size + pads[i] + pads[i + spatial] - (k - 1) * d - 1) % s
        for i, (size, k, s, d) in enumerate(zip(sizes, kernel, strides, dilations, strict=True))
    ]


def conv(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    x, w = node.input[0], node.input[1]
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    kernel = attribute(node, "kernel_shape", b.ranked_shape(w)[2:])
    if None in kernel:
        raise GradientError(f"{node_label(node)}: its kernel shape is unknown at build time")
    group = attribute(node, "group", 1)
    strides, dilations, pads = conv_geometry(b, node, x, kernel)
    leftover = _remainders(b, node, x, kernel, strides, dilations, pads)
    acc = b.accumulation_type(x)
    g = b.convert(first_grad(grads), b.elem_type(node.output[0]), acc)
    result: Grads = [None] * len(node.input)
    if b.needs(x):
        grad_x = b.op(
            "ConvTranspose",
            g,
            b.convert(w, b.elem_type(w), acc),
            group=group,
            kernel_shape=kernel,
            strides=strides,
            dilations=dilations,
            pads=pads,
            output_padding=leftover,
            hint=x,
        )
        result[0] = b.convert(grad_x, acc, b.elem_type(x))
    if b.needs(w):
        # dw[m, c, k] = sum over n, o of g[n, m, o] x[n, group(m) c, o s - p + k d]: x with its
        # batch as channels, [C/group, group N, ...], convolved by g as [M, N, ...] weights in
        # `group` groups (x's group j is input group j), dilated by s and strided by d.
        per_group = b.ranked_shape(w)[1]
        if per_group is None:
            raise GradientError(f"{node_label(node)}: its weight's channels are unknown at build time")
        xf = b.convert(x, b.elem_type(x), acc)
        sizes = b.op("Slice", b.shape_of(x), b.const([2]), b.const([2**62]))
        split = b.op("Reshape", xf, b.op("Concat", b.const([0, group, per_group]), sizes, axis=0), hint=x)
        spatial_axes = list(range(3, len(kernel) + 3))
        moved = b.op("Transpose", split, perm=[2, 1, 0, *spatial_axes], hint=x)
        batch_as_channels = b.op("Reshape", moved, b.op("Concat", b.const([per_group, -1]), sizes, axis=0))
        swap = [1, 0, *range(2, len(kernel) + 2)]
        per_offset = b.op(
            "Conv",
            batch_as_channels,
            b.op("Transpose", g, perm=swap),
            group=group,
            strides=dilations,
            dilations=strides,
            pads=pads,
            hint=w,
        )
        grad_w = b.op("Transpose", per_offset, perm=swap, hint=w)
        if any(r >= d for r, d in zip(leftover, dilations, strict=True)):
            # A remainder of a dilation or more gives offsets past the kernel: cut them.
            axes = list(range(2, len(kernel) + 2))
            grad_w = b.op("Slice", grad_w, b.const([0] * len(kernel)), b.const(list(kernel)), b.const(axes))
        result[1] = b.convert(grad_w, acc, b.elem_type(w))
    if bias is not None and b.needs(bias):
        summed = b.op("ReduceSum", g, b.const([0, *range(2, len(kernel) + 2)]), keepdims=0, hint=bias)
        result[2] = b.convert(summed, acc, b.elem_type(bias))
    return result
