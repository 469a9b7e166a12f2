"""Reference RotaryPositionEmbeddingGrad, written in onnxscript."""

from onnxscript import FLOAT, script

from ._opset import ascend, op
from .rotary_layout import RotaryLayout


@script(opset=ascend, default_opset=op)
def RotaryPositionEmbeddingGrad(dy, cos, sin, x=None, mode: int = 0):
    """Gradient of RotaryPositionEmbedding w.r.t. x, and w.r.t. cos and sin when x is given;
    computes in float32, outputs cast back to T. Without x, dcos and dsin come back empty."""
    dy_f = op.Cast(dy, to=FLOAT.dtype)
    # The forward is y = P(x) * cos + rotate(P(x)) * sin, with P and rotate permutations with sign
    # (the views of the rows [R, D] that RotaryLayout describes). rotate turns
    # block halves (u, v) into (-v, u), so its transpose turns them into (v, -u), and
    #   dx = P^T(dy * cos + rotate^T(dy * sin)),
    #   dcos = sum(dy * P(x)),  dsin = sum(dy * rotate(P(x)))  over the broadcast axes.
    shape = op.Shape(dy_f)
    d = op.Shape(dy_f, start=-1)
    rows = op.ReduceProd(op.Shape(dy_f, end=-1), keepdims=1)
    one = op.Constant(value_ints=[1])
    two = op.Constant(value_ints=[2])
    half = d / two
    a, b, blocks, w = RotaryLayout(d, mode=mode)
    # allowzero=1 throughout: a 0 in a target shape is an empty extent, not "copy".
    pairs = op.Concat(rows, a, two, b, axis=0)
    front = op.Concat(rows, one, half, axis=0)
    paired = op.Concat(rows, two, half, axis=0)
    halves = op.Concat(rows, blocks, two, w, axis=0)

    g = op.Reshape(dy_f * op.Cast(sin, to=FLOAT.dtype), halves, allowzero=1)
    g1, g2 = op.Split(g, num_outputs=2, axis=2)
    rotated_back = op.Reshape(op.Concat(g2, op.Neg(g1), axis=2), shape, allowzero=1)
    dxp = dy_f * op.Cast(cos, to=FLOAT.dtype) + rotated_back
    # P^T: view each row as [2, D/2] and put the 2-axis back between a and b.
    dx_e, dx_o = op.Split(op.Reshape(dxp, paired, allowzero=1), num_outputs=2, axis=1)
    back = op.Concat(rows, a, one, b, axis=0)
    dx_pairs = op.Concat(op.Reshape(dx_e, back, allowzero=1), op.Reshape(dx_o, back, allowzero=1), axis=2)
    dx = op.Reshape(dx_pairs, shape, allowzero=1)

    # ONNX Runtime inlines an absent x as "" everywhere, and rejects "" in any input slot that is
    # neither optional nor variadic, even in a branch never taken: so x is tested with
    # OptionalHasElement and read through Concat's variadic input (after an empty slice of dy).
    if op.OptionalHasElement(x):
        x_t = op.Concat(op.Slice(dy, op.Constant(value_ints=[0]), op.Constant(value_ints=[0])), x, axis=0)
        # dy is cast again rather than dy_f captured: ONNX Runtime removes a float32 no-op Cast
        # and, unable to rename the captured name inside the branch, warns.
        dy_b = op.Cast(dy, to=FLOAT.dtype)
        x_f = op.Cast(x_t, to=FLOAT.dtype)
        x_e, x_o = op.Split(op.Reshape(x_f, pairs, allowzero=1), num_outputs=2, axis=2)
        xp = op.Concat(op.Reshape(x_e, front, allowzero=1), op.Reshape(x_o, front, allowzero=1), axis=1)
        x1, x2 = op.Split(op.Reshape(xp, halves, allowzero=1), num_outputs=2, axis=2)
        permuted = op.Reshape(xp, shape, allowzero=1)
        rotated = op.Reshape(op.Concat(op.Neg(x2), x1, axis=2), shape, allowzero=1)
        # The axes cos broadcasts along: where its size differs from dy's (it is 1 there).
        axes = op.Squeeze(op.NonZero(shape - op.Shape(cos)), op.Constant(value_ints=[0]))
        dcos = op.ReduceSum(dy_b * permuted, axes, keepdims=1, noop_with_empty_axes=1)
        dsin = op.ReduceSum(dy_b * rotated, axes, keepdims=1, noop_with_empty_axes=1)
    else:
        dcos = op.Constant(value_floats=[])
        dsin = op.Constant(value_floats=[])
    return op.CastLike(dx, dy), op.CastLike(dcos, dy), op.CastLike(dsin, dy)
