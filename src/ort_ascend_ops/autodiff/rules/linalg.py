"""Rules for MatMul, Gemm and Einsum."""

from __future__ import annotations

import onnx

from ..graph import Backward, GradientError, Grads, attribute, first_grad, node_label


def _swap_last(b: Backward, name: str, rank: int) -> str:
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return b.op("Transpose", name, perm=perm)


def matmul(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    g, (a, w), y = first_grad(grads), node.input, node.output[0]
    ranks = b.rank(a), b.rank(w)
    if min(ranks) < 2:
        raise GradientError(f"{node_label(node)}: MatMul gradients need operands of rank 2 or more")
    y_dims = b.dims(y)

    # Each operand's gradient has the broadcast batch axes of y and the operand's own matrix axes.
    def batch_shape(operand):
        return None if y_dims is None else y_dims[:-2] + b.ranked_dims(operand)[-2:]

    grad_a = grad_w = None
    if b.needs(a):
        grad_a = b.op("MatMul", g, _swap_last(b, w, ranks[1]))
        # Against a matrix, a's batch axes are y's: nothing was broadcast to sum back (which, with
        # a dim unknown at build time, sum_to would otherwise find out at run time).
        grad_a = grad_a if ranks[1] == 2 else b.sum_to(grad_a, batch_shape(a), a)
    if b.needs(w):
        w_shape = b.ranked_shape(w)
        if ranks[1] == 2 and ranks[0] > 2 and None not in w_shape:
            # A weight shared by every row: one GEMM over the flattened rows, not a batched
            # MatMul and a sum over its batch.
            rows = b.op("Reshape", a, b.const([-1, w_shape[0]]), hint=a)
            grad_rows = b.op("Reshape", g, b.const([-1, w_shape[1]]), hint=y)
            grad_w = b.op("MatMul", _swap_last(b, rows, 2), grad_rows, hint=w)
        else:
            grad_w = b.op("MatMul", _swap_last(b, a, ranks[0]), g)
            grad_w = grad_w if ranks[0] == 2 else b.sum_to(grad_w, batch_shape(w), w)
    return [grad_a, grad_w]


def gemm(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    # Y = alpha A' B' + beta C with A' = A^T if transA, B' = B^T if transB.
    g, y = first_grad(grads), node.output[0]
    a, w = node.input[0], node.input[1]
    c = node.input[2] if len(node.input) > 2 and node.input[2] else None
    alpha, beta = attribute(node, "alpha", 1.0), attribute(node, "beta", 1.0)
    trans_a, trans_w = attribute(node, "transA", 0), attribute(node, "transB", 0)

    def scaled(name, factor):
        return name if factor == 1.0 else b.op("Mul", name, b.scalar(factor, y))

    grad_a = grad_w = grad_c = None
    if b.needs(a):  # dA' = alpha g B'^T; dA = dA'^T when transposed
        grad_a = scaled(
            b.op("Gemm", w, g, transA=trans_w, transB=1)
            if trans_a
            else b.op("Gemm", g, w, transB=1 - trans_w),
            alpha,
        )
    if b.needs(w):  # dB' = alpha A'^T g; dB = dB'^T when transposed
        grad_w = scaled(
            b.op("Gemm", g, a, transA=1, transB=trans_a)
            if trans_w
            else b.op("Gemm", a, g, transA=1 - trans_a),
            alpha,
        )
    if c is not None and b.needs(c):
        grad_c = b.sum_to(scaled(g, beta), b.dims(y), c)
    return [grad_a, grad_w, grad_c]


def einsum(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """Each operand's gradient is the einsum of g with the other operands into the operand's
    subscripts; a letter of the operand's alone (summed over it only) is left out of that einsum
    and the result expanded along it. Sums run in float32 for float16 and bfloat16 operands."""
    equation = attribute(node, "equation").replace(" ", "")
    terms, _, out = equation.partition("->")
    subscripts = terms.split(",")
    if "." in equation or any(len(set(s)) != len(s) for s in subscripts):
        raise GradientError(
            f"{node_label(node)}: no gradient for equation '{equation}' (broadcast '...' or a repeated subscript)"
        )
    if "->" not in equation:  # implicit output: the letters used once, in alphabetical order
        out = "".join(sorted(c for c in set(terms) if c != "," and terms.count(c) == 1))
    y = node.output[0]
    acc = b.accumulation_type(y)
    g = b.convert(first_grad(grads), b.elem_type(y), acc)
    result: Grads = [None] * len(node.input)
    for i, (operand, letters) in enumerate(zip(node.input, subscripts, strict=True)):
        if not b.needs(operand):
            continue
        others = [(n, s) for j, (n, s) in enumerate(zip(node.input, subscripts, strict=True)) if j != i]
        reached = out + "".join(s for _, s in others)
        kept = "".join(c for c in letters if c in reached)
        inputs = [g, *(b.convert(n, b.elem_type(n), acc) for n, _ in others)]
        spec = ",".join([out, *(s for _, s in others)]) + "->" + kept
        grad = b.op("Einsum", *inputs, equation=spec, hint=operand)
        if kept != letters:
            alone = [k for k, c in enumerate(letters) if c not in reached]
            grad = b.op("Expand", b.op("Unsqueeze", grad, b.const(alone)), b.shape_of(operand), hint=operand)
        result[i] = b.convert(grad, acc, b.elem_type(operand))
    return result
