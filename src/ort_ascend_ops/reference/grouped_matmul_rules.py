"""The rules GroupedMatmul and GroupedMatmulWeightGrad share (checks.py tells how they become ONNX),
and their loop over the groups."""

from onnxscript import BOOL, FLOAT, script

from ._opset import ascend, op
from .checks import All, Check, ElemType, IsFloatT


@script(opset=ascend, default_opset=op)
def GroupedRows(x, group_list):
    """The groups' row bounds [E + 1] (0, then each group's end) and x's shape, once x is float32,
    float16 or bfloat16 of rank 2 and group_list a 1-D list of counts >= 0 adding up to x.shape[0]."""
    shape = Check(op.Shape(x), IsFloatT(ElemType(x)), rule="input 'x' must be float32, float16 or bfloat16")
    two = op.Constant(value_ints=[2])
    shape = Check(shape, All(op.Equal(op.Shape(shape), two)), rule="input 'x' must have rank 2 ([M, K])")
    one = op.Constant(value_ints=[1])
    # A view of static rank 1, so that another rank meets the check rather than shape inference.
    counts = op.Reshape(
        Check(
            group_list,
            All(op.Equal(op.Shape(op.Shape(group_list)), one)),
            rule="input 'group_list' must have rank 1",
        ),
        op.Constant(value_ints=[-1]),
    )
    counts = Check(
        counts,
        All(op.GreaterOrEqual(counts, op.Constant(value_int=0))),
        rule="input 'group_list' must hold counts >= 0",
    )
    zero = op.Constant(value_ints=[0])
    ends = op.CumSum(counts, op.Constant(value_int=0))
    total = op.ReduceSum(op.Concat(zero, counts, axis=0), keepdims=1)
    ends = Check(
        ends,
        All(op.Equal(total, op.Slice(shape, zero, one))),
        rule="input 'group_list' must hold counts adding up to x.shape[0]",
    )
    return op.Concat(zero, ends, axis=0), shape


@script(opset=ascend, default_opset=op)
def GroupSlice(rows, bounds, group):
    """Rows [bounds[group], bounds[group + 1]) of `rows`."""
    at = op.Reshape(group, op.Constant(value_ints=[1]))
    one = op.Constant(value_ints=[1])
    return op.Slice(
        rows,
        op.Slice(bounds, at, at + one),
        op.Slice(bounds, at + one, at + one + one),
        op.Constant(value_ints=[0]),
    )


@script(opset=ascend, default_opset=op)
def AsKn(weight, transpose_weight: int):
    """The experts' float32 matrices as [E, K, N], weight's own or transposed, once weight has rank
    3. A view of three static axes, so that a weight of another rank meets the check rather than
    ONNX's shape inference."""
    dims = Check(
        op.Shape(weight),
        All(op.Equal(op.Shape(op.Shape(weight)), op.Constant(value_ints=[3]))),
        rule="input 'weight' must have rank 3",
    )
    view = op.Concat(
        op.Gather(dims, op.Constant(value_ints=[0])),
        op.Gather(dims, op.Constant(value_ints=[1])),
        op.Gather(dims, op.Constant(value_ints=[2])),
        axis=0,
    )
    w = op.Reshape(op.Cast(weight, to=FLOAT.dtype), view, allowzero=1)
    if op.Cast(op.Constant(value_int=transpose_weight), to=BOOL.dtype):
        kn = op.Transpose(w, perm=[0, 2, 1])
    else:
        kn = op.Identity(w)
    return kn
