"""Rules for ops that move, select or repeat elements."""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import helper

from ..graph import Backward, attribute


def transpose(b, node, grads):
    rank = b.rank(node.input[0])
    perm = attribute(node, "perm", list(range(rank))[::-1])
    inverse = [perm.index(i) for i in range(rank)]
    return [b.op("Transpose", grads[0], perm=inverse)]


def reshape(b, node, grads):
    """Reshape, Flatten, Squeeze, Unsqueeze: the same elements in x's shape."""
    return [b.reshape_like(grads[0], node.input[0])] + [None] * (len(node.input) - 1)


def expand(b, node, grads):
    return [b.sum_to(grads[0], b.shape(node.output[0]), node.input[0]), None]


def _axis(b: Backward, node: onnx.NodeProto) -> int:
    axis = attribute(node, "axis", 0)
    return axis + b.rank(node.input[0]) if axis < 0 else axis


def concat(b, node, grads):
    axis = _axis(b, node)
    sizes = [b.op("Slice", b.shape_of(x), b.const([axis]), b.const([axis + 1])) for x in node.input]
    parts = b.op("Split", grads[0], b.op("Concat", *sizes, axis=0), axis=axis, outputs=len(node.input))
    parts = parts if isinstance(parts, list) else [parts]
    return [part if b.needs(x) else None for x, part in zip(node.input, parts, strict=True)]


def split(b, node, grads):
    # Outputs nobody differentiates contribute zeros of their shape.
    parts = [g if g is not None else b.zeros_like(y) for g, y in zip(grads, node.output, strict=True)]
    return [b.op("Concat", *parts, axis=_axis(b, node))] + [None] * (len(node.input) - 1)


def _scatter_back(b: Backward, x: str, g: str, select: Callable[[str], str], reduction: str) -> str:
    """The gradient of an op that picks elements of x: each element's flat index goes through the
    same selection, and g is scattered back (added, where an element is picked twice)."""
    count = b.op("Size", x)
    flat = b.op("Range", b.const(0), count, b.const(1))
    picked = b.op("Reshape", select(b.op("Reshape", flat, b.shape_of(x))), b.const([-1]))
    zero = helper.make_tensor("value", b.elem_type(x), [1], [0])
    zeros = b.op("ConstantOfShape", b.op("Reshape", count, b.const([1])), value=zero)
    scattered = b.op(
        "ScatterElements", zeros, picked, b.op("Reshape", g, b.const([-1])), axis=0, reduction=reduction
    )
    return b.op("Reshape", scattered, b.shape_of(x), hint=x)


def slice_(b, node, grads):
    x, rest = node.input[0], list(node.input[1:])
    grad = _scatter_back(b, x, grads[0], lambda idx: b.op("Slice", idx, *rest), "none")
    return [grad] + [None] * len(rest)


def gather(b, node, grads):
    x, indices = node.input
    axis = attribute(node, "axis", 0)
    grad = _scatter_back(b, x, grads[0], lambda idx: b.op("Gather", idx, indices, axis=axis), "add")
    return [grad, None]
