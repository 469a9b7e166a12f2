"""Rules for elementwise ops. Broadcast inputs get their gradient summed back to their shape."""

from __future__ import annotations

import onnx

from ..graph import Backward, GradientError, node_label


def _binary(b: Backward, node: onnx.NodeProto, grad_a, grad_b):
    """Each input's gradient (built lazily, only when needed) summed back to its shape."""
    y = node.output[0]
    return [
        b.sum_to(build(), b.shape(y), name) if b.needs(name) else None
        for name, build in zip(node.input, (grad_a, grad_b), strict=True)
    ]


def add(b, node, grads):
    g = grads[0]
    return _binary(b, node, lambda: g, lambda: g)


def sum_(b, node, grads):
    (g,), y = grads, node.output[0]
    return [b.sum_to(g, b.shape(y), name) if b.needs(name) else None for name in node.input]


def sub(b, node, grads):
    g = grads[0]
    return _binary(b, node, lambda: g, lambda: b.op("Neg", g))


def mul(b, node, grads):
    (g,), (x, w) = grads, node.input
    return _binary(b, node, lambda: b.op("Mul", g, w), lambda: b.op("Mul", g, x))


def div(b, node, grads):
    # y = a / c: da = g / c, dc = -g * y / c.
    (g,), (_, c), y = grads, node.input, node.output[0]
    return _binary(b, node, lambda: b.op("Div", g, c), lambda: b.op("Neg", b.op("Div", b.op("Mul", g, y), c)))


def neg(b, node, grads):
    return [b.op("Neg", grads[0])]


def pow_(b, node, grads):
    (g,), (x, exponent) = grads, node.input
    value = b.constant(exponent)
    if b.needs(exponent) or value is None or value.size != 1:
        raise GradientError(f"{node_label(node)}: only a constant scalar exponent is differentiable")
    e = float(value.reshape(-1)[0])
    # d(x^e) = e x^(e-1); x^(e-1) is computed as Pow too, so x = 0 behaves as the forward does.
    slope = b.op("Mul", b.scalar(e, x), b.op("Pow", x, b.scalar(e - 1.0, x)))
    return [b.op("Mul", g, slope), None]


def sqrt(b, node, grads):
    y = node.output[0]
    return [b.op("Div", b.op("Mul", grads[0], b.scalar(0.5, y)), y)]


def exp(b, node, grads):
    return [b.op("Mul", grads[0], node.output[0])]


def log(b, node, grads):
    return [b.op("Div", grads[0], node.input[0])]


def relu(b, node, grads):
    x = node.input[0]
    return [b.op("Where", b.op("Greater", x, b.scalar(0.0, x)), grads[0], b.scalar(0.0, x))]


def sigmoid(b, node, grads):
    y = node.output[0]
    return [b.op("Mul", grads[0], b.op("Mul", y, b.op("Sub", b.scalar(1.0, y), y)))]


def tanh(b, node, grads):
    y = node.output[0]
    return [b.op("Mul", grads[0], b.op("Sub", b.scalar(1.0, y), b.op("Mul", y, y)))]


def where(b, node, grads):
    (g,), (condition, x, _) = grads, node.input
    zero = b.scalar(0.0, x)
    picked = _binary(
        b,
        onnx.helper.make_node("Where", node.input[1:], node.output),
        lambda: b.op("Where", condition, g, zero),
        lambda: b.op("Where", condition, zero, g),
    )
    return [None, *picked]


def cast(b, node, grads):
    return [b.op("Cast", grads[0], to=b.elem_type(node.input[0]))]


def identity(b, node, grads):
    return [grads[0]]
