"""The rules of the loss-scaling family (checks.py tells how they become ONNX)."""

from onnxscript import FLOAT, script

from ._opset import ascend, op
from .checks import TYPE_FLOAT32, All, Check, ElemType, IsFloatT


@script(opset=ascend, default_opset=op)
def UnscaleRules(scaled_grads, found_inf, inv_scale):
    """inv_scale as a scalar, and a float32 zero, once the types and counts are checked against
    the contract: each output is computed from one of them, so that nothing is before every check."""
    one = op.Constant(value_ints=[1])
    count = op.Size(inv_scale)
    count = Check(
        count,
        IsFloatT(ElemType(scaled_grads)),
        rule="input 'scaled_grads' must be float32, float16 or bfloat16",
    )
    f32 = op.Constant(value_int=TYPE_FLOAT32)
    count = Check(count, op.Equal(ElemType(found_inf), f32), rule="input 'found_inf' must be float32")
    count = Check(count, op.Equal(ElemType(inv_scale), f32), rule="input 'inv_scale' must be float32")
    count = Check(count, All(op.Equal(op.Size(found_inf), one)), rule="input 'found_inf' must hold one value")
    count = Check(count, All(op.Equal(count, one)), rule="input 'inv_scale' must hold one value")
    zero = op.Cast(count * op.Constant(value_int=0), to=FLOAT.dtype)
    # The value at the checked count's last index (0): a Reshape to a scalar would run before the
    # checks (ONNX Runtime folds its target shape) and fail first with ONNX Runtime's words.
    last = count - op.Constant(value_int=1)
    return op.Gather(op.Reshape(inv_scale, op.Constant(value_ints=[-1])), last, axis=0), zero
