"""Rules for ops that move or repeat elements, and Slice."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from ..graph import Backward, GradientError, Grads, attribute, first_grad, node_label
from .index import scatter_back

_END = np.iinfo(np.int64).max  # a Slice end past every axis
_WHOLE = 2**62  # a Slice end at least this large is past any axis a tensor can have


def transpose(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    g, rank = first_grad(grads), b.rank(node.input[0])
    perm = attribute(node, "perm", list(range(rank))[::-1])
    if perm == [1, 0]:
        product = b.producer(g)
        if product is not None and product.op_type == "MatMul":
            # A Linear's weight, used as W^T: its gradient (x^T @ g)^T is g^T @ x, one GEMM whose
            # operand transposes ONNX Runtime folds into it, instead of a GEMM and a Transpose of
            # the weight-sized result. A 2-D product has 2-D operands.
            x, y = product.input
            return [b.op("MatMul", _transposed(b, y), _transposed(b, x), hint=node.input[0])]
    inverse = [perm.index(i) for i in range(rank)]
    return [b.op("Transpose", g, perm=inverse)]


def _transposed(b: Backward, matrix: str) -> str:
    """``matrix``^T: the input of a Transpose the backward built, or a new Transpose."""
    source = b.producer(matrix)
    if source is not None and source.op_type == "Transpose" and attribute(source, "perm", None) == [1, 0]:
        return source.input[0]
    return b.op("Transpose", matrix, perm=[1, 0])


def reshape(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """Reshape, Flatten, Squeeze, Unsqueeze: the same elements in x's shape."""
    return [b.reshape_like(first_grad(grads), node.input[0])] + [None] * (len(node.input) - 1)


def expand(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    return [b.sum_to(first_grad(grads), b.dims(node.output[0]), node.input[0]), None]


def _axis(b: Backward, node: onnx.NodeProto) -> int:
    axis = attribute(node, "axis", 0)
    return axis + b.rank(node.input[0]) if axis < 0 else axis


def concat(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    axis = _axis(b, node)
    sizes = [b.op("Slice", b.shape_of(x), b.const([axis]), b.const([axis + 1])) for x in node.input]
    parts = b.op(
        "Split", first_grad(grads), b.op("Concat", *sizes, axis=0), axis=axis, outputs=len(node.input)
    )
    parts = parts if isinstance(parts, list) else [parts]
    return [part if b.needs(x) else None for x, part in zip(node.input, parts, strict=True)]


def split(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    # Outputs nobody differentiates contribute zeros of their shape.
    parts = [g if g is not None else b.zeros_like(y) for g, y in zip(grads, node.output, strict=True)]
    return [b.op("Concat", *parts, axis=_axis(b, node))] + [None] * (len(node.input) - 1)


def slice_(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    x, rest = node.input[0], list(node.input[1:])
    pads = _slice_pads(b, x, rest)
    if pads is not None:
        grad = b.op("Pad", first_grad(grads), b.const(pads), hint=x) if any(pads) else first_grad(grads)
    else:
        grad = scatter_back(b, x, first_grad(grads), lambda idx: b.op("Slice", idx, *rest), "none")
    return [grad] + [None] * len(rest)


def _slice_pads(b: Backward, x: str, rest: list[str]) -> list[int] | None:
    """Pad's pads that put a unit-step Slice's gradient back in place (zeros around it), when the
    starts, ends, axes and steps are constants and the sliced axes' sizes are known (or the slice
    takes a whole axis); else None (the general scatter). A rotary embedding's halves are such
    slices, and all zeros (the gradient itself) an exporter's x[:, :]."""
    starts, ends, axes, steps = (b.constant(n) if n else None for n in (rest + ["", "", ""])[:4])
    dims = b.shape(x)
    if starts is None or ends is None or dims is None or (len(rest) > 2 and rest[2] and axes is None):
        return None
    if len(rest) > 3 and rest[3] and (steps is None or np.any(steps != 1)):
        return None
    rank = len(dims)
    sliced = range(len(starts)) if axes is None else [int(a) % rank for a in axes]
    before, after = [0] * rank, [0] * rank
    for axis, start, end in zip(sliced, starts.tolist(), ends.tolist(), strict=True):
        size = dims[axis]
        if size is None:  # of unknown size: only the whole axis (an exporter's x[:, :]) is known
            if start != 0 or end < _WHOLE:
                return None
            continue
        first = min(max(start + size if start < 0 else start, 0), size)
        last = max(min(max(end + size if end < 0 else end, 0), size), first)
        before[axis], after[axis] = first, size - last
    return before + after


def tile(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """y holds r_i copies of x along each axis i: g seen as [r_0, d_0, r_1, d_1, ...] summed
    over the r axes. The shape is built at run time, so repeats and x's shape may be dynamic."""
    g, (x, repeats) = first_grad(grads), node.input
    column = b.const([1])
    pairs = b.op(
        "Concat", b.op("Unsqueeze", repeats, column), b.op("Unsqueeze", b.shape_of(x), column), axis=1
    )
    blocks = b.op("Reshape", g, b.op("Reshape", pairs, b.const([-1])))
    copies = b.const(list(range(0, 2 * b.rank(x), 2)))
    return [b.op("ReduceSum", blocks, copies, keepdims=0, hint=x), None]


def pad(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """Constant mode only: x's gradient is g with the padding sliced off (and zeros padded back
    where negative pads cropped x); the constant value gets the sum of g over the padding."""
    mode = attribute(node, "mode", "constant")
    if mode != "constant":
        raise GradientError(f"{node_label(node)}: no gradient for Pad mode '{mode}' (only 'constant')")
    g, x = first_grad(grads), node.input[0]
    value, axes = (node.input[i] if len(node.input) > i and node.input[i] else None for i in (2, 3))
    axes = (
        b.const(list(range(b.rank(x))))
        if axes is None
        else b.convert(axes, b.elem_type(axes), TensorProto.INT64)
    )
    starts, ends, uncrop = _unpad_amounts(b, node.input[1])
    restored = g if uncrop is None else b.op("Pad", g, uncrop, "", axes)
    grad = b.op("Slice", restored, starts, ends, axes, hint=x)
    grad_value = None
    if value is not None and b.needs(value):
        padding = b.op("Sub", b.op("ReduceSum", g, keepdims=0), b.op("ReduceSum", grad, keepdims=0))
        grad_value = b.reshape_like(padding, value)
    return [grad, None, grad_value, None]


def _unpad_amounts(b: Backward, pads: str) -> tuple[str, str, str | None]:
    """Slice starts and ends that drop a Pad's positive pads (begins then ends, per axis) from g,
    and the pads that restore what negative pads cropped (None when none are negative), read
    from constant pads or computed at run time."""
    value = b.constant(pads)
    if value is not None:
        value = value.astype(np.int64)
        begin, end = np.split(value, 2)
        crop = np.maximum(-value, 0)
        ends = np.where(end > 0, -end, _END)
        return b.const(np.maximum(begin, 0)), b.const(ends), b.const(crop) if crop.any() else None
    zero = b.const(0)
    begin, end = b.op("Split", pads, axis=0, num_outputs=2, outputs=2)
    ends = b.op("Where", b.op("Greater", end, zero), b.op("Neg", end), b.const(_END))
    return b.op("Max", begin, zero), ends, b.op("Max", b.op("Neg", pads), zero)


def trilu(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """Trilu keeps a triangle of x and zeroes the rest: g through the same triangle."""
    return [b.op("Trilu", first_grad(grads), *node.input[1:], upper=attribute(node, "upper", 1)), None]
