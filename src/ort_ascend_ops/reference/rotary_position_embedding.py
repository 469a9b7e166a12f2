"""Reference RotaryPositionEmbedding, written in onnxscript."""

from onnxscript import FLOAT, script

from ._opset import ascend, op
from .rotary_layout import RotaryLayout


@script(opset=ascend, default_opset=op)
def RotaryPositionEmbedding(x, cos, sin, mode: int = 0):
    """y = x * cos + rotate(x) * sin; computes in float32, y cast back to T."""
    x_f = op.Cast(x, to=FLOAT.dtype)
    # Every mode is a permutation with sign of the last axis D: y = P(x) * cos + rotate(P(x)) * sin.
    # Both are Split and Concat on views of the rows [R, D], which ONNX Runtime runs several times
    # faster than a Gather or a Transpose. P views a row as [a, 2, b] and brings the 2-axis first:
    # mode 3 de-interleaves; for the others a = 1 and P keeps x. rotate views a row as
    # [blocks, 2, w] and turns the halves (u, v) of every block into (-v, u).
    shape = op.Shape(x_f)
    d = op.Shape(x_f, start=-1)
    rows = op.ReduceProd(op.Shape(x_f, end=-1), keepdims=1)
    one = op.Constant(value_ints=[1])
    two = op.Constant(value_ints=[2])
    half = d / two
    a, b, blocks, w = RotaryLayout(d, mode=mode)
    # allowzero=1 throughout: a 0 in a target shape is an empty extent, not "copy".
    pairs = op.Concat(rows, a, two, b, axis=0)
    front = op.Concat(rows, one, half, axis=0)
    halves = op.Concat(rows, blocks, two, w, axis=0)

    x_e, x_o = op.Split(op.Reshape(x_f, pairs, allowzero=1), num_outputs=2, axis=2)
    xp = op.Concat(op.Reshape(x_e, front, allowzero=1), op.Reshape(x_o, front, allowzero=1), axis=1)
    x1, x2 = op.Split(op.Reshape(xp, halves, allowzero=1), num_outputs=2, axis=2)
    permuted = op.Reshape(xp, shape, allowzero=1)
    rotated = op.Reshape(op.Concat(op.Neg(x2), x1, axis=2), shape, allowzero=1)
    y = permuted * op.Cast(cos, to=FLOAT.dtype) + rotated * op.Cast(sin, to=FLOAT.dtype)
    return op.CastLike(y, x)
