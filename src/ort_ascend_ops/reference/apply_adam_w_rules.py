"""The rules of the optimizer family (checks.py tells how they become ONNX)."""

from onnxscript import DOUBLE, FLOAT, INT32, script

from ..opschema import choice_rule, choices
from ._opset import ascend, op
from .checks import TYPE_FLOAT32, All, AnyOf, Check, ElemType, IsFloatT, SameType, SameVector

MAXIMIZE = choices("ApplyAdamW", "maximize")
MAXIMIZE_RULE = choice_rule("ApplyAdamW", "maximize")


@script(opset=ascend, default_opset=op)
def AdamWRules(param, exp_avg, exp_avg_sq, grad, step, lr, maximize: int):
    """param's shape, and step and lr as float64 scalars, once the types, shapes and values are
    checked against the contract."""
    _ = SameType(exp_avg, param, rule="input 'exp_avg' must have param's element type")
    _ = SameType(exp_avg_sq, param, rule="input 'exp_avg_sq' must have param's element type")
    known = AnyOf(op.Equal(op.Constant(value_ints=MAXIMIZE), op.Constant(value_int=maximize)))
    shape = Check(op.Shape(param), known, rule=MAXIMIZE_RULE)
    param_type = ElemType(param)
    grad_type = ElemType(grad)
    shape = Check(shape, IsFloatT(param_type), rule="input 'param' must be float32, float16 or bfloat16")
    pair = op.Or(
        op.Equal(grad_type, param_type),
        op.And(op.Equal(param_type, op.Constant(value_int=TYPE_FLOAT32)), IsFloatT(grad_type)),
    )
    shape = Check(
        shape,
        pair,
        rule="inputs 'param' and 'grad' are not an allowed (TP, T) pair; allowed: (float32, float32), "
        "(float32, float16), (float32, bfloat16), (float16, float16), (bfloat16, bfloat16)",
    )
    shape = Check(shape, SameVector(op.Shape(exp_avg), shape), rule="input 'exp_avg' must have param's shape")
    shape = Check(
        shape, SameVector(op.Shape(exp_avg_sq), shape), rule="input 'exp_avg_sq' must have param's shape"
    )
    shape = Check(shape, SameVector(op.Shape(grad), shape), rule="input 'grad' must have param's shape")
    one = op.Constant(value_ints=[1])
    shape = Check(shape, All(op.Equal(op.Size(step), one)), rule="input 'step' must hold one value")
    shape = Check(shape, All(op.Equal(op.Size(lr), one)), rule="input 'lr' must hold one value")
    t = op.Cast(op.Reshape(step, op.Constant(value_ints=[])), to=DOUBLE.dtype)
    shape = Check(
        shape,
        op.GreaterOrEqual(t, op.Cast(op.Constant(value_float=1.0), to=DOUBLE.dtype)),
        rule="input 'step' must be at least 1 (the first step is 1)",
    )
    # Read again from the checked shape's branch, so that nothing is computed before every check.
    checked = op.Size(shape) * op.Constant(value_int=0)
    t = t + op.Cast(checked, to=DOUBLE.dtype)
    learning_rate = op.Cast(op.Reshape(lr, op.Constant(value_ints=[])), to=DOUBLE.dtype)
    return shape, t, learning_rate


# Significant digits tried, one either side of float32's nine: they are counted from the
# value's decimal exponent, which a float log10 may put one off near a power of ten.
DIGITS = [float(k) for k in range(0, 12)]


@script(opset=ascend, default_opset=op)
def TorchDecimal(value: float):
    """The float64 a torch user wrote for a float32 attribute (0.999 for 0.99900001287, 4.2e-05
    for 4.19999997e-05): the decimal of fewest significant digits that rounds to the float32, as
    the native kernel's shortest round trip finds it; the float32's exact value where none does."""
    exact = op.Cast(op.Constant(value_float=value), to=DOUBLE.dtype)
    one = op.Cast(op.Constant(value_float=1.0), to=DOUBLE.dtype)
    ten = op.Cast(op.Constant(value_float=10.0), to=DOUBLE.dtype)
    zero = op.Equal(exact, op.Cast(op.Constant(value_float=0.0), to=DOUBLE.dtype))
    exponent = op.Floor(op.Log(op.Where(zero, one, op.Abs(exact))) / op.Log(ten))
    # k digits: a scale of 10^(k - 1 - exponent), exact for the attributes' values (below 10).
    scales = op.Pow(ten, op.Cast(op.Constant(value_floats=DIGITS), to=DOUBLE.dtype) - one - exponent)
    rounded = op.Round(exact * scales) / scales
    candidates = op.Concat(rounded, op.Reshape(exact, op.Constant(value_ints=[1])), axis=0)
    found = op.Equal(op.Cast(candidates, to=FLOAT.dtype), op.Constant(value_float=value))
    first = op.ArgMax(op.Cast(found, to=INT32.dtype), keepdims=0)  # the first of the largest
    return op.Gather(candidates, first)
