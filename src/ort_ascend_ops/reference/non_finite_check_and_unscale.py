"""Reference NonFiniteCheckAndUnscale, written in onnxscript."""

from onnxscript import FLOAT, script

from ._opset import ascend, op
from .non_finite_check_and_unscale_rules import UnscaleRules


@script(opset=ascend, default_opset=op)
def NonFiniteCheckAndUnscale(scaled_grads, found_inf, inv_scale):
    """GradScaler.unscale_: the product in float32 rounded to T once; the flag from the inputs as
    given. ReduceSum of the flags is 0 for an empty tensor, where ReduceMax has no value."""
    inv, zero = UnscaleRules(scaled_grads, found_inf, inv_scale)
    g = op.Cast(scaled_grads, to=FLOAT.dtype)
    bad = op.Cast(op.Or(op.IsInf(g), op.IsNaN(g)), to=FLOAT.dtype)
    found = op.Greater(op.ReduceSum(bad, keepdims=0) + zero, op.Constant(value_float=0.0))
    found_inf_out = op.Where(found, op.Constant(value_float=1.0), found_inf)
    return op.CastLike(g * inv, scaled_grads), found_inf_out
