"""Reference ApplyAdamW, written in onnxscript."""

from onnxscript import DOUBLE, FLOAT, script

from ..opschema import default
from ._opset import ascend, op
from .apply_adam_w_rules import AdamWRules, TorchDecimal


@script(opset=ascend, default_opset=op)
def ApplyAdamW(
    param,
    exp_avg,
    exp_avg_sq,
    grad,
    step,
    lr,
    beta1: float = default("ApplyAdamW", "beta1", float),
    beta2: float = default("ApplyAdamW", "beta2", float),
    weight_decay: float = default("ApplyAdamW", "weight_decay", float),
    eps: float = default("ApplyAdamW", "eps", float),
    maximize: int = default("ApplyAdamW", "maximize", int),
):
    """torch.optim.AdamW's step: scalars in float64 rounded to float32 once, elements in float32
    in torch's order, outputs cast back to TP."""
    shape, t, learning_rate = AdamWRules(param, exp_avg, exp_avg_sq, grad, step, lr, maximize)
    one = op.Cast(op.Constant(value_float=1.0), to=DOUBLE.dtype)
    b1 = TorchDecimal(value=beta1)
    b2 = TorchDecimal(value=beta2)
    wd = TorchDecimal(value=weight_decay)
    decay = op.Cast(one - learning_rate * wd, to=FLOAT.dtype)
    step_size = op.Cast(learning_rate / (one - op.Pow(b1, t)), to=FLOAT.dtype)
    correction2_sqrt = op.Cast(op.Sqrt(one - op.Pow(b2, t)), to=FLOAT.dtype)
    weight = op.Cast(one - b1, to=FLOAT.dtype)
    beta2_f = op.Cast(b2, to=FLOAT.dtype)
    rest2 = op.Cast(one - b2, to=FLOAT.dtype)

    p = op.Reshape(op.Cast(param, to=FLOAT.dtype), shape, allowzero=1)
    m = op.Reshape(op.Cast(exp_avg, to=FLOAT.dtype), shape, allowzero=1)
    v = op.Reshape(op.Cast(exp_avg_sq, to=FLOAT.dtype), shape, allowzero=1)
    g = op.Reshape(op.Cast(grad, to=FLOAT.dtype), shape, allowzero=1)
    sign = op.Where(
        op.Equal(op.Constant(value_int=maximize), op.Constant(value_int=1)),
        op.Constant(value_float=-1.0),
        op.Constant(value_float=1.0),
    )
    g = g * sign
    p = p * decay
    # torch.lerp's two forms, by the weight's size.
    half = op.Constant(value_float=0.5)
    m = op.Where(
        op.Less(op.Abs(weight), half),
        m + weight * (g - m),
        g - (g - m) * (op.Constant(value_float=1.0) - weight),
    )
    v = v * beta2_f + rest2 * g * g
    denom = op.Sqrt(v) / correction2_sqrt + op.Constant(value_float=eps)
    p = p + op.Neg(step_size) * (m / denom)
    return op.CastLike(p, param), op.CastLike(m, param), op.CastLike(v, param)
