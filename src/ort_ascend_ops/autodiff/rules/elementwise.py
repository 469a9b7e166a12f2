"""Rules for elementwise ops. Broadcast inputs get their gradient summed back to their shape."""

from __future__ import annotations

import math

import onnx

from ..graph import Backward, GradientError, Grads, attribute, first_grad, node_label
from .grad_nodes import forward_output


def _binary(b: Backward, node: onnx.NodeProto, grad_a, grad_b):
    """Each input's gradient (built lazily, only when needed) summed back to its shape."""
    y = node.output[0]
    return [
        b.sum_to(build(), b.dims(y), name) if b.needs(name) else None
        for name, build in zip(node.input, (grad_a, grad_b), strict=True)
    ]


def add(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    g = first_grad(grads)
    return _binary(b, node, lambda: g, lambda: g)


def sum_(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    g, y = first_grad(grads), node.output[0]
    return [b.sum_to(g, b.dims(y), name) if b.needs(name) else None for name in node.input]


def sub(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    g = first_grad(grads)
    return _binary(b, node, lambda: g, lambda: b.op("Neg", g))


def mul(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    g, (x, w) = first_grad(grads), node.input
    return _binary(b, node, lambda: b.op("Mul", g, w), lambda: b.op("Mul", g, x))


def div(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    # y = a / c: da = g / c, dc = -g * y / c.
    g, (_, c), y = first_grad(grads), node.input, node.output[0]
    return _binary(b, node, lambda: b.op("Div", g, c), lambda: b.op("Neg", b.op("Div", b.op("Mul", g, y), c)))


def neg(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    return [b.op("Neg", first_grad(grads))]


def pow_(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    g, (x, exponent) = first_grad(grads), node.input
    value = b.constant(exponent)
    if b.needs(exponent) or value is None or value.size != 1:
        raise GradientError(f"{node_label(node)}: only a constant scalar exponent is differentiable")
    e = float(value.reshape(-1)[0])
    # d(x^e) = e x^(e-1); x^(e-1) is computed as Pow too, so x = 0 behaves as the forward does.
    slope = b.op("Mul", b.scalar(e, x), b.op("Pow", x, b.scalar(e - 1.0, x)))
    return [b.op("Mul", g, slope), None]


def sqrt(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    y = node.output[0]
    return [b.op("Div", b.op("Mul", first_grad(grads), b.scalar(0.5, y)), y)]


def exp(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    return [b.op("Mul", first_grad(grads), node.output[0])]


def log(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    return [b.op("Div", first_grad(grads), node.input[0])]


def relu(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    x = node.input[0]
    return [b.op("Where", b.op("Greater", x, b.scalar(0.0, x)), first_grad(grads), b.scalar(0.0, x))]


def reciprocal(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    y = node.output[0]
    return [b.op("Neg", b.op("Mul", first_grad(grads), b.op("Mul", y, y)))]


def abs_(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    # Sign(0) = 0: the zero subgradient at the kink, as torch.abs takes.
    return [b.op("Mul", first_grad(grads), b.op("Sign", node.input[0]))]


def sin(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    return [b.op("Mul", first_grad(grads), b.op("Cos", node.input[0]))]


def cos(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    return [b.op("Neg", b.op("Mul", first_grad(grads), b.op("Sin", node.input[0])))]


def erf(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    # d erf(x) = 2/sqrt(pi) exp(-x^2).
    x = node.input[0]
    slope = b.op("Mul", b.scalar(2.0 / math.sqrt(math.pi), x), b.op("Exp", b.op("Neg", b.op("Mul", x, x))))
    return [b.op("Mul", first_grad(grads), slope)]


def softplus(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    x = node.input[0]
    return [b.op("Mul", first_grad(grads), b.op("Sigmoid", x))]


def gelu(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """The slope is built from Erf or Tanh: the Gelu op itself (opset 20) is missing at opset 18."""
    x, approximate = node.input[0], attribute(node, "approximate", "none")
    if approximate == "none":
        slope = _gelu_slope(b, x)
    elif approximate == "tanh":
        slope = _gelu_tanh_slope(b, x)
    else:
        raise GradientError(f"{node_label(node)}: no gradient for approximate='{approximate}'")
    return [b.op("Mul", first_grad(grads), slope)]


def _gelu_slope(b: Backward, x: str) -> str:
    # y = x Phi(x): dy = Phi(x) + x phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2, phi = Phi'.
    half = b.scalar(0.5, x)
    cdf = b.op(
        "Mul", half, b.op("Add", b.scalar(1.0, x), b.op("Erf", b.op("Mul", x, b.scalar(math.sqrt(0.5), x))))
    )
    pdf = b.op(
        "Mul",
        b.scalar(1.0 / math.sqrt(2.0 * math.pi), x),
        b.op("Exp", b.op("Mul", b.op("Mul", x, x), b.scalar(-0.5, x))),
    )
    return b.op("Add", cdf, b.op("Mul", x, pdf))


def _gelu_tanh_slope(b: Backward, x: str) -> str:
    # y = x (1 + t) / 2, t = tanh(u), u = sqrt(2/pi) (x + c x^3):
    # dy = (1 + t) / 2 + x (1 - t^2) u' / 2, u' = sqrt(2/pi) (1 + 3 c x^2).
    c, k = 0.044715, math.sqrt(2.0 / math.pi)
    square = b.op("Mul", x, x)
    u = b.op("Mul", b.scalar(k, x), b.op("Add", x, b.op("Mul", b.scalar(c, x), b.op("Mul", square, x))))
    t = b.op("Tanh", u)
    du = b.op("Mul", b.scalar(k, x), b.op("Add", b.scalar(1.0, x), b.op("Mul", b.scalar(3.0 * c, x), square)))
    one_plus = b.op("Add", b.scalar(1.0, x), t)
    one_minus_square = b.op("Sub", b.scalar(1.0, x), b.op("Mul", t, t))
    inner = b.op("Add", one_plus, b.op("Mul", b.op("Mul", x, one_minus_square), du))
    return b.op("Mul", b.scalar(0.5, x), inner)


def sigmoid(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    y = node.output[0]
    return [b.op("Mul", first_grad(grads), b.op("Mul", y, b.op("Sub", b.scalar(1.0, y), y)))]


def tanh(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    y = node.output[0]
    return [b.op("Mul", first_grad(grads), b.op("Sub", b.scalar(1.0, y), b.op("Mul", y, y)))]


def where(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    g, (condition, x, _) = first_grad(grads), node.input
    zero = b.scalar(0.0, x)
    picked = _binary(
        b,
        onnx.helper.make_node("Where", node.input[1:], node.output),
        lambda: b.op("Where", condition, g, zero),
        lambda: b.op("Where", condition, zero, g),
    )
    return [None, *picked]


def extremum(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """Max, Min: g goes to the inputs equal to the output, shared equally among ties (two tied
    inputs get g/2 each, as torch.maximum and torch.minimum give; it is also what central
    differences see)."""
    g, y = first_grad(grads), node.output[0]
    hits = [b.op("Cast", b.op("Equal", x, y), to=b.elem_type(y)) for x in node.input]
    share = b.op("Div", g, b.total(hits, "ties"))
    return [
        b.sum_to(b.op("Mul", hit, share), b.dims(y), x) if b.needs(x) else None
        for x, hit in zip(node.input, hits, strict=True)
    ]


def clip(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """y = Min(Max(x, low), high) for the bounds given, differentiated as written: a tie with a
    bound passes g to x (as torch.clamp does), and a low bound above the high one sends all of g
    to the high one (the output is high there)."""
    g, x, y = first_grad(grads), node.input[0], node.output[0]
    low, high = (node.input[i] if len(node.input) > i and node.input[i] else None for i in (1, 2))

    def masked(condition, value):
        return b.op("Where", condition, value, b.scalar(0.0, x))

    def bound_grad(bound, condition, value):  # condition: built only when the bound needs it
        return b.sum_to(masked(condition(), value), b.dims(y), bound) if b.needs(bound) else None

    through, grad_high = g, None
    if high is not None:  # Min(raised, high): g to raised where raised <= high, to high elsewhere
        raised = x if low is None else b.op("Max", x, low)
        through = masked(b.op("LessOrEqual", raised, high), g)
        grad_high = bound_grad(high, lambda: b.op("Greater", raised, high), g)
    if low is None:
        return [through, None, grad_high]
    grad_low = bound_grad(low, lambda: b.op("Less", x, low), through)
    return [masked(b.op("GreaterOrEqual", x, low), through), grad_low, grad_high]


def cast(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """Cast and CastLike: the gradient cast back to x's type (CastLike's second input only gives
    the type)."""
    return [b.op("Cast", first_grad(grads), to=b.elem_type(node.input[0]))] + [None] * (len(node.input) - 1)


def identity(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    return [first_grad(grads)]


def dropout(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """Dropout(data, ratio, training_mode) -> output, mask. In training mode the gradient goes
    where the forward's mask kept an element, scaled by 1 / (1 - ratio) as the output is: the mask
    the forward drew, read back (so the backward drops exactly what the forward dropped); in
    inference mode (no training_mode, or a constant false one) it is the identity."""
    g, x = first_grad(grads), node.input[0]
    ratio, training = (node.input[i] if len(node.input) > i and node.input[i] else None for i in (1, 2))
    mode = None if training is None else b.constant(training)
    if training is None or (mode is not None and not bool(mode.reshape(-1)[0])):
        return [g] + [None] * (len(node.input) - 1)
    mask = forward_output(b, node, 1, "mask")
    kept = b.op(
        "Sub",
        b.scalar(1.0, x),
        b.convert(ratio, b.elem_type(ratio), b.elem_type(x)) if ratio else b.scalar(0.5, x),
    )
    return [b.op("Where", mask, b.op("Div", g, kept), b.scalar(0.0, x))] + [None] * (len(node.input) - 1)
