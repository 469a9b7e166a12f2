"""Rules for ops that pick elements by index (Gather, GatherElements, GatherND, TopK) or write
them there (ScatterND, ScatterElements), and OneHot. What is picked gets its gradient scattered
back, added where an element is picked twice, in float32 for half types (ONNX Runtime's CPU
scatters do not add float16 or bfloat16)."""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import TensorProto, helper

from ..graph import Backward, GradientError, Grads, attribute, first_grad, node_label
from .grad_nodes import forward_output


def scatter_back(b: Backward, x: str, g: str, select: Callable[[str], str], reduction: str) -> str:
    """The gradient of an op that picks elements of x: each element's flat index goes through the
    same selection, and g is scattered back (added, in float32 for half types, where an element
    is picked twice)."""
    elem, acc = b.elem_type(x), b.accumulation_type(x)
    count = b.op("Size", x)
    flat = b.op("Range", b.const(0), count, b.const(1))
    picked = b.op("Reshape", select(b.op("Reshape", flat, b.shape_of(x))), b.const([-1]))
    zero = helper.make_tensor("value", acc, [1], [0])
    zeros = b.op("ConstantOfShape", b.op("Reshape", count, b.const([1])), value=zero)
    updates = b.convert(b.op("Reshape", g, b.const([-1])), elem, acc)
    scattered = b.op("ScatterElements", zeros, picked, updates, axis=0, reduction=reduction)
    return b.op("Reshape", b.convert(scattered, acc, elem), b.shape_of(x), hint=x)


def gather(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """On axis 0 a lookup of rows: an embedding's. The lookups of a table with a padding row
    (``nn.Embedding(padding_idx=...)``) send that row nothing, as torch's embedding backward
    skips the padding index; what the table's other uses send it (a tied lm_head's) stays."""
    x, indices = node.input
    axis = attribute(node, "axis", 0)
    if axis == 0:
        return [_rows_back(b, x, indices, first_grad(grads), b.padding_row(x)), None]
    grad = scatter_back(b, x, first_grad(grads), lambda idx: b.op("Gather", idx, indices, axis=axis), "add")
    return [grad, None]


def _rows_back(b: Backward, x: str, indices: str, g: str, padding_row: int | None = None) -> str:
    """Gather on axis 0 (an embedding lookup): g's rows added into a zero table at their indices,
    one ScatterND row per index, instead of an index for every element of the table; the rows
    looked up at ``padding_row`` add nothing."""
    acc = b.accumulation_type(x)
    rows = b.convert(indices, b.elem_type(indices), TensorProto.INT64)
    table = b.op("Gather", b.shape_of(x), b.const(0))  # a scalar: rows keep the indices' shape
    rows = b.op("Where", b.op("Less", rows, b.const(0)), b.op("Add", rows, table), rows)  # Gather's negatives
    updates = b.convert(g, b.elem_type(x), acc)
    if padding_row is not None:
        # [*indices.shape, 1, ...]: one flag per looked-up row, broadcast over the row's values.
        trailing = b.const([-1 - i for i in range(b.rank(x) - 1)])
        padded = b.op("Unsqueeze", b.op("Equal", rows, b.const(padding_row)), trailing)
        updates = b.op("Where", padded, b.const(0.0, acc), updates, hint=x)
    return b.rows_added(x, b.op("Unsqueeze", rows, b.const([-1])), updates)


def _added_elements(b: Backward, x: str, indices: str, g: str, axis: int) -> str:
    """g added into zeros of x's shape at ``indices`` along ``axis`` (GatherElements' and TopK's
    gradient): ScatterElements, in x's accumulation type."""
    elem, acc = b.elem_type(x), b.accumulation_type(x)
    updates = b.convert(g, elem, acc)
    summed = b.op("ScatterElements", b.zeros_like(x, acc), indices, updates, axis=axis, reduction="add")
    return b.convert(summed, acc, elem)


def gather_elements(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    x, indices = node.input
    return [_added_elements(b, x, indices, first_grad(grads), attribute(node, "axis", 0)), None]


def top_k(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """TopK(x, k) -> values, indices: the values' gradient goes to the elements they were picked
    from (the indices are integers: a discrete choice with no gradient, reused as the forward
    made it, so that the same elements get it)."""
    if grads[0] is None:
        return [None, None]
    x = node.input[0]
    axis = attribute(node, "axis", -1)
    indices = forward_output(b, node, 1, "indices")
    return [_added_elements(b, x, indices, grads[0], axis + b.rank(x) if axis < 0 else axis), None]


def gather_nd(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """GatherND picks slices of x by index tuples: g added back into zeros at them. Each tuple
    becomes the row of x viewed as ``[d0 * ... * d(k-1), rest]`` (negative indices counted from
    the end first), added by ``rows_scattered``: ScatterND would lose additions to a repeated
    tuple on several threads. Without batch_dims, and with the tuples' length k known."""
    x, indices = node.input
    if attribute(node, "batch_dims", 0):
        raise GradientError(f"{node_label(node)}: no gradient for GatherND with batch_dims")
    k = b.ranked_shape(indices)[-1]
    if k is None:
        raise GradientError(f"{node_label(node)}: GatherND gradients need the index tuples' length known")
    elem, acc = b.elem_type(x), b.accumulation_type(x)
    dims = b.op("Slice", b.shape_of(x), b.const([0]), b.const([k]))
    # Row-major strides of the first k axes: stride_j = d(j+1) * ... * d(k-1).
    strides = b.op(
        "Concat",
        *(
            b.op("ReduceProd", b.op("Slice", dims, b.const([j + 1]), b.const([k])), keepdims=1)
            for j in range(k)
        ),
        axis=0,
    )
    tuples = b.op("Cast", indices, to=TensorProto.INT64)
    wrapped = b.op("Where", b.op("Less", tuples, b.const(0)), b.op("Add", tuples, dims), tuples)
    rows = b.op("ReduceSum", b.op("Mul", wrapped, strides), b.const([-1]), keepdims=1)
    rest = b.op("Slice", b.shape_of(x), b.const([k]), b.const([2**62]))
    table = b.op("Concat", b.const([-1]), rest, axis=0)
    zeros = b.op("Reshape", b.zeros_like(x, acc), table)
    updates = b.convert(first_grad(grads), elem, acc)
    summed = b.rows_scattered(zeros, rows, updates, hint=x)
    return [b.op("Reshape", b.convert(summed, acc, elem), b.shape_of(x), hint=x), None]


def scatter_elements(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """As ScatterND's, along an axis: with reduction 'none' the elements of data that updates
    overwrite get no gradient, with 'add' all of g reaches data; updates get g where they went."""
    g, (data, indices, updates) = first_grad(grads), node.input
    axis = attribute(node, "axis", 0)
    reduction = attribute(node, "reduction", "none")
    if reduction not in ("none", "add"):
        raise GradientError(f"{node_label(node)}: no gradient for reduction '{reduction}'")
    grad_data = None
    if b.needs(data):
        grad_data = (
            g if reduction == "add" else b.op("ScatterElements", g, indices, b.zeros_like(updates), axis=axis)
        )
    grad_updates = b.op("GatherElements", g, indices, axis=axis) if b.needs(updates) else None
    return [grad_data, None, grad_updates]


def one_hot(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """OneHot(indices, depth, values = [off, on]): the output is ``on`` at the hot positions and
    ``off`` elsewhere, so off gets the sum of g elsewhere, on the sum of g at them."""
    values = node.input[2]
    if not b.needs(values):
        return [None, None, None]
    g, y = first_grad(grads), node.output[0]
    hot = b.op("OneHot", node.input[0], node.input[1], b.const([0, 1]), axis=attribute(node, "axis", -1))
    at_hot = b.op("ReduceSum", b.op("Mul", g, b.op("Cast", hot, to=b.elem_type(y))), keepdims=0)
    elsewhere = b.op("Sub", b.op("ReduceSum", g, keepdims=0), at_hot)
    return [
        None,
        None,
        b.op("Concat", *(b.op("Unsqueeze", v, b.const([0])) for v in (elsewhere, at_hot)), axis=0),
    ]


def scatter_nd(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """With reduction 'none' the elements of data that updates overwrite get no gradient; with
    'add' all of g reaches data. updates get g at their indices either way."""
    g, (data, indices, updates) = first_grad(grads), node.input
    reduction = attribute(node, "reduction", "none")
    if reduction not in ("none", "add"):
        raise GradientError(f"{node_label(node)}: no gradient for reduction '{reduction}'")
    grad_data = None
    if b.needs(data):
        grad_data = g if reduction == "add" else b.op("ScatterND", g, indices, b.zeros_like(updates))
    grad_updates = b.op("GatherND", g, indices) if b.needs(updates) else None
    return [grad_data, None, grad_updates]
