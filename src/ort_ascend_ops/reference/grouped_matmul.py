"""Reference GroupedMatmul, written in onnxscript."""

from onnxscript import FLOAT, script

from ..opschema import default
from ._opset import ascend, op
from .checks import All, Check, SameType
from .grouped_matmul_rules import AsKn, GroupedRows, GroupSlice


@script(opset=ascend, default_opset=op)
def GroupedMatmul(
    x, weight, group_list, transpose_weight: int = default("GroupedMatmul", "transpose_weight", int)
):
    """Each group's rows of x times its expert's matrix, one group per iteration; computes in
    float32, y cast back to T."""
    bounds, x_shape = GroupedRows(x, group_list)
    _ = SameType(weight, x, rule="input 'weight' must have x's element type")
    kn = AsKn(weight, transpose_weight=transpose_weight)
    experts, k, n = op.Split(op.Shape(kn), num_outputs=3)
    kn = Check(
        kn,
        All(op.Equal(experts, op.Shape(group_list))),
        rule="input 'group_list' must hold one count per expert of weight",
    )
    kn = Check(
        kn,
        All(op.Equal(k, op.Slice(x_shape, op.Constant(value_ints=[1]), op.Constant(value_ints=[2])))),
        rule="input 'weight' must have x.shape[1] as its K (weight.shape[1], or [2] with transpose_weight)",
    )
    x_f = op.Cast(x, to=FLOAT.dtype)
    y = op.ConstantOfShape(op.Concat(op.Constant(value_ints=[0]), n, axis=0))
    group = op.Constant(value_int=0)
    groups = op.Size(group_list)
    # A while loop: onnx.reference runs no iteration of a Loop without a condition input.
    more = op.Less(group, groups)
    while more:
        w_g = op.Gather(kn, group, axis=0)
        y = op.Concat(y, op.MatMul(GroupSlice(x_f, bounds, group), w_g), axis=0)
        group = group + op.Constant(value_int=1)
        more = op.Less(group, groups)
    return op.CastLike(y, x)
