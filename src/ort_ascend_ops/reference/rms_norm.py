"""Reference RmsNorm, written in onnxscript."""

from onnxscript import DOUBLE, FLOAT, script

from ..opschema import default
from ._opset import ascend, op
from .rms_norm_rules import NormRules


@script(opset=ascend, default_opset=op)
def RmsNorm(x, gamma, epsilon: float = default("RmsNorm", "epsilon", float)):
    """RMS normalization over the last rank(gamma) axes; computes in float32, y cast back to T.
    The mean of squares is taken in float64, where the squares of large finite float32 values
    cannot overflow."""
    x_shape, n = NormRules(x, gamma)
    # A float32 copy (ONNX Runtime's CPU kernels, Size for one, do not all take bfloat16), shaped
    # by the checked shape, so that nothing is computed before every check has passed.
    x_f = op.Reshape(op.Cast(x, to=FLOAT.dtype), x_shape, allowzero=1)
    gamma_f = op.Cast(gamma, to=FLOAT.dtype)
    norm_axes = op.Range(op.Squeeze(n), op.Squeeze(op.Shape(x_shape)), op.Constant(value_int=1))
    # Max(.., 1) defines the mean over a zero-size normalized extent as 0 instead of 0/0.
    count = op.Max(
        op.Cast(op.Size(gamma_f), to=DOUBLE.dtype), op.Cast(op.Constant(value_float=1.0), to=DOUBLE.dtype)
    )
    mean_sq = op.ReduceSumSquare(op.Cast(x_f, to=DOUBLE.dtype), norm_axes, keepdims=1) / count
    eps = op.Cast(op.Constant(value_float=epsilon), to=DOUBLE.dtype)
    rstd = op.Cast(op.Reciprocal(op.Sqrt(mean_sq + eps)), to=FLOAT.dtype)
    y = op.CastLike(x_f * rstd * gamma_f, x)
    return y, rstd
