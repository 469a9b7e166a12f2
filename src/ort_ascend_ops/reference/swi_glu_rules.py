"""The rules SwiGlu and SwiGluGrad share (checks.py tells how they become ONNX)."""

from onnxscript import script

from ._opset import ascend, op
from .checks import All, Check, ElemType, IsFloatT


@script(opset=ascend, default_opset=op)
def GluRules(x, dim: int):
    """x's view [outer, 2, half] (the two halves along dim, each contiguous per outer index) and the
    output's shape, x's with x.shape[dim] halved, once x's type and shape are checked against the
    contract. Views with static axes, rather than Slice and Concat along dim, so that a dim out of
    range meets the check, never ONNX's shape inference."""
    shape = Check(op.Shape(x), IsFloatT(ElemType(x)), rule="input 'x' must be float32, float16 or bfloat16")
    rank = op.Shape(shape)
    zero = op.Constant(value_ints=[0])
    shape = Check(shape, All(op.Greater(rank, zero)), rule="input 'x' must have rank >= 1")
    given = op.Reshape(op.Constant(value_int=dim), op.Constant(value_ints=[1]))
    in_range = op.And(op.GreaterOrEqual(given, op.Neg(rank)), op.Less(given, rank))
    shape = Check(shape, All(in_range), rule="attribute 'dim' must be in [-rank(x), rank(x))")
    rank = op.Shape(shape)
    axis = op.Where(op.Less(given, zero), given + rank, given)
    two = op.Constant(value_ints=[2])
    even = op.Equal(op.Mod(op.Gather(shape, axis, axis=0), two), zero)
    shape = Check(
        shape, All(even), rule="input 'x' must have an even extent along dim, cut in two equal halves"
    )
    outer = op.ReduceProd(op.Slice(shape, zero, axis), keepdims=1)
    rest = op.ReduceProd(op.Slice(shape, axis, rank), keepdims=1) / two
    halved = op.ScatterElements(shape, axis, op.Gather(shape, axis, axis=0) / two, axis=0)
    return op.Concat(outer, two, rest, axis=0), halved
