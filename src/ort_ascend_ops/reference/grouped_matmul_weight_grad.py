"""Reference GroupedMatmulWeightGrad, written in onnxscript."""

from onnxscript import BOOL, FLOAT, script

from ..opschema import default
from ._opset import ascend, op
from .checks import All, Check, SameType
from .grouped_matmul_rules import GroupedRows, GroupSlice


@script(opset=ascend, default_opset=op)
def GroupedMatmulWeightGrad(
    x, dy, group_list, transpose_weight: int = default("GroupedMatmulWeightGrad", "transpose_weight", int)
):
    """Per group, its rows of x and of dy multiplied and summed over the rows ([E, K, N]), one group
    per iteration; transposed with transpose_weight. Computes in float32, dweight cast back to T."""
    bounds, x_shape = GroupedRows(x, group_list)
    _ = SameType(dy, x, rule="input 'dy' must have x's element type")
    two = op.Constant(value_ints=[2])
    zero, one = op.Constant(value_ints=[0]), op.Constant(value_ints=[1])
    dy_shape = Check(
        op.Shape(dy), All(op.Equal(op.Shape(op.Shape(dy)), two)), rule="input 'dy' must have rank 2"
    )
    dy_shape = Check(
        dy_shape,
        All(op.Equal(op.Slice(dy_shape, zero, one), op.Slice(x_shape, zero, one))),
        rule="input 'dy' must have x's number of rows",
    )
    x_f = op.Cast(x, to=FLOAT.dtype)
    dy_f = op.Cast(dy, to=FLOAT.dtype)
    kn = op.Concat(op.Slice(x_shape, one, two), op.Slice(dy_shape, one, two), axis=0)
    grads = op.ConstantOfShape(op.Concat(zero, kn, axis=0))
    group = op.Constant(value_int=0)
    groups = op.Size(group_list)
    more = op.Less(group, groups)
    while more:
        x_g = GroupSlice(x_f, bounds, group)
        dy_g = GroupSlice(dy_f, bounds, group)
        grad = op.MatMul(op.Transpose(x_g, perm=[1, 0]), dy_g)
        grads = op.Concat(grads, op.Unsqueeze(grad, zero), axis=0)
        group = group + op.Constant(value_int=1)
        more = op.Less(group, groups)
    if op.Cast(op.Constant(value_int=transpose_weight), to=BOOL.dtype):
        out = op.Transpose(grads, perm=[0, 2, 1])
    else:
        out = op.Identity(grads)
    return op.CastLike(out, x)
