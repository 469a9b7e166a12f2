"""Reference RmsNormGrad, written in onnxscript."""

from onnxscript import FLOAT, script

from ._opset import ascend, op
from .checks import Check, SameType, SameVector, WithoutOnes
from .rms_norm_rules import NormRules


@script(opset=ascend, default_opset=op)
def RmsNormGrad(dy, x, rstd, gamma):
    """Gradient of RmsNorm w.r.t. x and gamma; computes in float32, dx cast back to T."""
    x_shape, n = NormRules(x, gamma)
    _ = SameType(dy, x, rule="input 'dy' must have x's element type")
    _ = SameType(rstd, op.Constant(value_float=0.0), rule="input 'rstd' must be float32")
    x_shape = Check(x_shape, SameVector(op.Shape(dy), x_shape), rule="input 'dy' must have x's shape")
    zero_1d = op.Constant(value_ints=[0])
    x_shape = Check(
        x_shape,
        SameVector(WithoutOnes(op.Shape(rstd)), WithoutOnes(op.Slice(x_shape, zero_1d, n))),
        rule="input 'rstd' must hold one value per row, shaped x.shape[:n] + [1] * rank(gamma) or "
        "x.shape[:n] (size-1 axes may be added or dropped)",
    )
    # Float32 copies (ONNX Runtime's CPU kernels, Size for one, do not all take bfloat16), shaped
    # by the checked shape, so that nothing is computed before every check has passed.
    dy_f = op.Reshape(op.Cast(dy, to=FLOAT.dtype), x_shape, allowzero=1)
    x_f = op.Reshape(op.Cast(x, to=FLOAT.dtype), x_shape, allowzero=1)
    gamma_f = op.Cast(gamma, to=FLOAT.dtype)
    rank_x = op.Shape(x_shape)
    n = rank_x - op.Shape(op.Shape(gamma))  # again, from the shape every check has passed
    one = op.Constant(value_int=1)
    lead_axes = op.Range(op.Constant(value_int=0), op.Squeeze(n), one)
    norm_axes = op.Range(op.Squeeze(n), op.Squeeze(rank_x), one)
    # rstd may arrive as x.shape[:n], keepdims, or squeezed: bring it to keepdims.
    # allowzero=1 because a 0 in the target shape is a real empty extent, not "copy".
    ones = op.Expand(op.Constant(value_ints=[1]), rank_x - n)
    keepdims = op.Concat(op.Slice(x_shape, zero_1d, n), ones, axis=0)
    rstd_k = op.Reshape(op.Cast(rstd, to=FLOAT.dtype), keepdims, allowzero=1)

    xhat = x_f * rstd_k
    g = dy_f * gamma_f
    # Max(.., 1) keeps a zero-size normalized extent from producing 0/0.
    count = op.Max(op.Cast(op.Size(gamma_f), to=FLOAT.dtype), op.Constant(value_float=1.0))
    mean_gx = op.ReduceSum(g * xhat, norm_axes, keepdims=1) / count
    dx = op.CastLike(rstd_k * (g - xhat * mean_gx), x)
    # noop_with_empty_axes=1: with n == 0 there is nothing to sum over.
    dgamma = op.ReduceSum(dy_f * xhat, lead_axes, keepdims=0, noop_with_empty_axes=1)
    return dx, dgamma
