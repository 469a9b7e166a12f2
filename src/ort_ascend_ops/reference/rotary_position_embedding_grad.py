"""Reference RotaryPositionEmbeddingGrad, written in onnxscript: one function for any node, and
one per presence of x (``VARIANTS``)."""

from onnxscript import FLOAT, script

from ..opschema import default
from ._opset import ascend, op
from .checks import Check, PadPair, ReadPresent, SameType, SameVector
from .rotary_position_embedding_layout import RotaryLayout, RotatedViews, RowView
from .rotary_position_embedding_rules import RotaryRules

_MODE = default("RotaryPositionEmbeddingGrad", "mode", int)

# The forward is y = P(x) * cos + rotate(P(x)) * sin, with P and rotate permutations with sign
# (the views of the rows [R, D] that RotaryLayout describes). rotate turns block halves (u, v)
# into (-v, u), so its transpose turns them into (v, -u), and
#   dx = P^T(dy * cos + rotate^T(dy * sin)),
#   dcos = sum(dy * P(x)),  dsin = sum(dy * rotate(P(x)))  over the broadcast axes.


@script(opset=ascend, default_opset=op)
def RotaryGradDx(dy, cos, sin, shape, mode: int):
    """dx of float32 dy of checked shape ``shape``, cos and sin (which broadcast to it)."""
    d, rows = RowView(shape)
    one = op.Constant(value_ints=[1])
    two = op.Constant(value_ints=[2])
    a, b, blocks, w = RotaryLayout(d, mode=mode)
    # allowzero=1 throughout: a 0 in a target shape is an empty extent, not "copy".
    g = op.Reshape(dy * sin, op.Concat(rows, blocks, two, w, axis=0), allowzero=1)
    g1, g2 = op.Split(g, num_outputs=2, axis=2)
    dxp = dy * cos + op.Reshape(op.Concat(g2, op.Neg(g1), axis=2), shape, allowzero=1)
    # P^T: view each row as [2, D/2] and put the 2-axis back between a and b.
    paired = op.Concat(rows, two, d / two, axis=0)
    dx_e, dx_o = op.Split(op.Reshape(dxp, paired, allowzero=1), num_outputs=2, axis=1)
    back = op.Concat(rows, a, one, b, axis=0)
    dx_pairs = op.Concat(op.Reshape(dx_e, back, allowzero=1), op.Reshape(dx_o, back, allowzero=1), axis=2)
    return op.Reshape(dx_pairs, shape, allowzero=1)


@script(opset=ascend, default_opset=op)
def RotarySums(dy, x, cos, shape, mode: int):
    """dcos and dsin (float32), once x is checked against dy (of checked shape ``shape``)."""
    _ = SameType(x, dy, rule="input 'x' must have dy's element type")
    x_shape = Check(op.Shape(x), SameVector(op.Shape(x), shape), rule="input 'x' must have dy's shape")
    dy_f = op.Cast(dy, to=FLOAT.dtype)
    x_f = op.Reshape(op.Cast(x, to=FLOAT.dtype), x_shape, allowzero=1)
    permuted, rotated = RotatedViews(x_f, x_shape, mode=mode)
    # The axes cos broadcasts along: where its size differs from dy's (it is 1 there).
    padded_shape, padded_cos = PadPair(shape, op.Shape(cos))
    axes = op.Squeeze(op.NonZero(padded_shape - padded_cos), op.Constant(value_ints=[0]))
    dcos = op.ReduceSum(dy_f * permuted, axes, keepdims=1, noop_with_empty_axes=1)
    dsin = op.ReduceSum(dy_f * rotated, axes, keepdims=1, noop_with_empty_axes=1)
    return dcos, dsin


@script(opset=ascend, default_opset=op)
def RotaryPositionEmbeddingGrad(dy, cos, sin, x=None, mode: int = _MODE):
    """Gradient of RotaryPositionEmbedding w.r.t. x, and w.r.t. cos and sin when x is given;
    computes in float32, outputs cast back to T. Without x, dcos and dsin come back empty. x is
    tested for at run time, with OptionalHasElement, which ONNX Runtime 1.32 runs for float32 and
    float16 up to opset 27: the variants below serve the other nodes."""
    shape = RotaryRules(dy, cos, sin, mode=mode)
    dy_f = op.Reshape(op.Cast(dy, to=FLOAT.dtype), shape, allowzero=1)
    dx = RotaryGradDx(dy_f, op.Cast(cos, to=FLOAT.dtype), op.Cast(sin, to=FLOAT.dtype), shape, mode=mode)
    if op.OptionalHasElement(x):
        empty = op.Slice(dy, op.Constant(value_ints=[0]), op.Constant(value_ints=[0]))
        x_t = ReadPresent(empty, x, rule="input 'x' must have dy's element type and shape")
        dcos, dsin = RotarySums(dy, x_t, cos, shape, mode=mode)
    else:
        dcos = op.Constant(value_floats=[])
        dsin = op.Constant(value_floats=[])
    return op.CastLike(dx, dy), op.CastLike(dcos, dy), op.CastLike(dsin, dy)


@script(opset=ascend, default_opset=op)
def RotaryPositionEmbeddingGradWithX(dy, cos, sin, x, mode: int = _MODE):
    """RotaryPositionEmbeddingGrad for nodes that pass x."""
    shape = RotaryRules(dy, cos, sin, mode=mode)
    dy_f = op.Reshape(op.Cast(dy, to=FLOAT.dtype), shape, allowzero=1)
    dx = RotaryGradDx(dy_f, op.Cast(cos, to=FLOAT.dtype), op.Cast(sin, to=FLOAT.dtype), shape, mode=mode)
    dcos, dsin = RotarySums(dy, x, cos, shape, mode=mode)
    return op.CastLike(dx, dy), op.CastLike(dcos, dy), op.CastLike(dsin, dy)


@script(opset=ascend, default_opset=op)
def RotaryPositionEmbeddingGradWithoutX(dy, cos, sin, x=None, mode: int = _MODE):
    """RotaryPositionEmbeddingGrad for nodes without x, which produce dx alone."""
    shape = RotaryRules(dy, cos, sin, mode=mode)
    dy_f = op.Reshape(op.Cast(dy, to=FLOAT.dtype), shape, allowzero=1)
    dx = RotaryGradDx(dy_f, op.Cast(cos, to=FLOAT.dtype), op.Cast(sin, to=FLOAT.dtype), shape, mode=mode)
    empty = op.CastLike(op.Constant(value_floats=[]), dy)
    return op.CastLike(dx, dy), empty, empty


# Present optional inputs -> (overload, function).
VARIANTS = {
    frozenset({"x"}): ("x", RotaryPositionEmbeddingGradWithX),
    frozenset(): ("no_x", RotaryPositionEmbeddingGradWithoutX),
}
