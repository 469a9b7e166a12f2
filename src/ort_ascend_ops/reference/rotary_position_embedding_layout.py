"""The row views both RoPE reference functions take of the last axis, by mode."""

from onnxscript import script

from ._opset import ascend, op


@script(opset=ascend, default_opset=op)
def RotaryLayout(d, mode: int):
    """(a, b, blocks, w) for D = d (1-D int64): P views a row as [a, 2, b] and brings the 2-axis
    first (mode 3 de-interleaves; the others have a = 1 and keep the row), and rotate views it as
    [blocks, 2, w] and turns the halves (u, v) of every block into (-v, u)."""
    one = op.Constant(value_ints=[1])
    two = op.Constant(value_ints=[2])
    half = d / two
    quarter = half / two
    # fmt: off
    layouts = op.Concat(  # a   b     blocks  w
        one,  half, one,  half,     # 0 half
        one,  half, half, one,      # 1 interleave
        one,  half, two,  quarter,  # 2 quarter
        half, one,  one,  half,     # 3 interleave-half
        axis=0,
    )
    # fmt: on
    layout = op.Gather(op.Reshape(layouts, op.Constant(value_ints=[4, 4])), op.Constant(value_int=mode))
    a, b, blocks, w = op.Split(layout, num_outputs=4)
    return a, b, blocks, w


@script(opset=ascend, default_opset=op)
def RowView(shape):
    """[D] and [R] of a checked shape [..., D], R the product of the others. From the checked
    shape, not the tensor's: ONNX Runtime folds Shape of a tensor whose shape it knows, which
    would let what follows run before the checks (checks.py)."""
    d = op.Reshape(op.Gather(shape, op.Constant(value_int=-1)), op.Constant(value_ints=[1]))
    rows = op.ReduceProd(
        op.Slice(shape, op.Constant(value_ints=[0]), op.Constant(value_ints=[-1])), keepdims=1
    )
    return d, rows


@script(opset=ascend, default_opset=op)
def RotatedViews(x, shape, mode: int):
    """P(x) and rotate(P(x)) of float32 rows x [..., D] of checked shape ``shape`` (the views
    RotaryLayout describes): y = P(x) * cos + rotate(P(x)) * sin is the forward, and the grad's
    dcos and dsin sum them."""
    # Split and Concat on views of the rows [R, D], which ONNX Runtime runs several times faster
    # than a Gather or a Transpose. allowzero=1 throughout: a 0 in a target shape is an empty
    # extent, not "copy".
    d, rows = RowView(shape)
    one = op.Constant(value_ints=[1])
    two = op.Constant(value_ints=[2])
    a, b, blocks, w = RotaryLayout(d, mode=mode)
    x_e, x_o = op.Split(op.Reshape(x, op.Concat(rows, a, two, b, axis=0), allowzero=1), num_outputs=2, axis=2)
    front = op.Concat(rows, one, d / two, axis=0)
    xp = op.Concat(op.Reshape(x_e, front, allowzero=1), op.Reshape(x_o, front, allowzero=1), axis=1)
    halves = op.Concat(rows, blocks, two, w, axis=0)
    x1, x2 = op.Split(op.Reshape(xp, halves, allowzero=1), num_outputs=2, axis=2)
    permuted = op.Reshape(xp, shape, allowzero=1)
    rotated = op.Reshape(op.Concat(op.Neg(x2), x1, axis=2), shape, allowzero=1)
    return permuted, rotated
