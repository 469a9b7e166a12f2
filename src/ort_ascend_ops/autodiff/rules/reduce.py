"""Rules for Softmax, LogSoftmax and the reductions."""

from __future__ import annotations

import onnx

from ..graph import Backward, GradientError, Grads, attribute, first_grad, node_label


def _axis(b: Backward, node: onnx.NodeProto, default: int) -> int:
    axis = attribute(node, "axis", default)
    return axis + b.rank(node.input[0]) if axis < 0 else axis


def softmax(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    # dx = y (g - sum(g y)) over the axis.
    g, y = first_grad(grads), node.output[0]
    axes = b.const([_axis(b, node, -1)])
    dot = b.op("ReduceSum", b.op("Mul", g, y), axes, keepdims=1)
    return [b.op("Mul", y, b.op("Sub", g, dot))]


def log_softmax(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    return [log_softmax_grad(b, first_grad(grads), node.output[0], _axis(b, node, -1))]


def log_softmax_grad(b: Backward, g: str, y: str, axis: int) -> str:
    """The gradient reaching x of y = LogSoftmax(x) over ``axis`` (the loss rules share it):
    g - softmax(x) sum(g) over the axis."""
    picked = b.picked(g)
    if picked is not None and picked[2] == axis:
        # A likelihood loss's g, one value u per row: -softmax(x) u, then u added at its index,
        # in the one buffer the Exp makes (a language model's [tokens, vocabulary] is the
        # step's largest tensor; the general form holds three of them at once).
        indices, values, _ = picked
        scaled = b.op("Mul", b.op("Exp", y), b.op("Neg", values))
        return b.op("ScatterElements", scaled, indices, values, axis=axis, reduction="add")
    total = b.op("ReduceSum", g, b.const([axis]), keepdims=1)
    return b.op("Sub", g, b.op("Mul", b.op("Exp", y), total))


def _reduced_axes(b: Backward, node: onnx.NodeProto) -> list[int] | None:
    """The axes the node reduces (all of them for an absent axes input), or None when it reduces
    nothing (empty axes with noop_with_empty_axes)."""
    rank = b.rank(node.input[0])
    axes_input = node.input[1] if len(node.input) > 1 and node.input[1] else None
    if axes_input is None:
        axes = []
    else:
        value = b.constant(axes_input)
        if value is None:
            raise GradientError(f"{node_label(node)}: the gradient needs constant axes")
        axes = [int(a) + rank if a < 0 else int(a) for a in value.reshape(-1)]
    if not axes:
        return None if attribute(node, "noop_with_empty_axes", 0) else list(range(rank))
    return sorted(axes)


def _spread(b: Backward, node: onnx.NodeProto, g: str, axes: list[int]) -> str:
    """g with the reduced axes restored as size 1 (as keepdims=1 leaves them)."""
    if attribute(node, "keepdims", 1):
        return g
    return b.op("Unsqueeze", g, b.const(axes))


def reduce_sum(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    axes = _reduced_axes(b, node)
    if axes is None:
        return [first_grad(grads), None]
    x = node.input[0]
    return [b.op("Expand", _spread(b, node, first_grad(grads), axes), b.shape_of(x)), None]


def reduce_mean(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    axes = _reduced_axes(b, node)
    if axes is None:
        return [first_grad(grads), None]
    x, y = node.input[0], node.output[0]
    count = b.op("Cast", b.op("Div", b.op("Size", x), b.op("Size", y)), to=b.elem_type(x))
    spread = b.op("Expand", _spread(b, node, first_grad(grads), axes), b.shape_of(x))
    return [b.op("Div", spread, count), None]


def reduce_max(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    # The gradient goes to the elements equal to the maximum, shared equally among ties.
    axes = _reduced_axes(b, node)
    if axes is None:
        return [first_grad(grads), None]
    x, y = node.input[0], node.output[0]
    hit = b.op("Cast", b.op("Equal", x, _spread(b, node, y, axes)), to=b.elem_type(x))
    ties = b.op("ReduceSum", hit, b.const(axes), keepdims=1)
    share = b.op("Div", _spread(b, node, first_grad(grads), axes), ties)
    return [b.op("Mul", hit, share), None]


def _kept(b: Backward, node: onnx.NodeProto, value: str) -> str:
    """An output-shaped ``value`` (g or y) with the reduced axes kept as size 1, so that it
    broadcasts against x; itself when the node reduces nothing."""
    axes = _reduced_axes(b, node)
    return value if axes is None else _spread(b, node, value, axes)


def reduce_sum_square(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    # dx = 2 x g; with nothing reduced y = x^2 elementwise, the same formula.
    x = node.input[0]
    return [b.op("Mul", b.op("Mul", x, b.scalar(2.0, x)), _kept(b, node, first_grad(grads))), None]


def reduce_l2(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    # dx = g x / y, taken as 0 where y = 0 (the subgradient torch.linalg.vector_norm takes).
    x, y = node.input[0], node.output[0]
    norm, zero = _kept(b, node, y), b.scalar(0.0, x)
    scale = b.op("Div", _kept(b, node, first_grad(grads)), norm)
    return [b.op("Mul", x, b.op("Where", b.op("Equal", norm, zero), zero, scale)), None]


def cum_sum(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    # Each y[i] sums x[j] for j up to i (from i on, reversed): x[j] gets the g[i] of those i, the
    # same sums the other way round.
    reverse, exclusive = attribute(node, "reverse", 0), attribute(node, "exclusive", 0)
    return [b.op("CumSum", first_grad(grads), node.input[1], exclusive=exclusive, reverse=1 - reverse), None]
