"""Reference RmsNormGrad, written in onnxscript."""

from onnxscript import FLOAT, script

from ._opset import ascend, op


@script(opset=ascend, default_opset=op)
def RmsNormGrad(dy, x, rstd, gamma):
    """Gradient of RmsNorm w.r.t. x and gamma; computes in float32, dx cast back to T."""
    # Float32 copies first: ONNX Runtime's CPU kernels (Size, for one) do not all take bfloat16.
    dy_f = op.Cast(dy, to=FLOAT.dtype)
    x_f = op.Cast(x, to=FLOAT.dtype)
    gamma_f = op.Cast(gamma, to=FLOAT.dtype)
    # Ranks are only known at run time. Squeeze(Shape(Shape(.))) rather than Size(Shape(.)):
    # at load time ONNX Runtime 1.32 propagates the latter as the element count of the tensor.
    x_shape = op.Shape(x_f)
    gamma_rank_1d = op.Shape(op.Shape(gamma_f))
    rank_x = op.Squeeze(op.Shape(x_shape))
    n = rank_x - op.Squeeze(gamma_rank_1d)
    one = op.Constant(value_int=1)
    lead_axes = op.Range(op.Constant(value_int=0), n, one)
    norm_axes = op.Range(n, rank_x, one)
    # rstd may arrive as x.shape[:n], keepdims, or squeezed: bring it to keepdims.
    # allowzero=1 because a 0 in the target shape is a real empty extent, not "copy".
    ones = op.Expand(op.Constant(value_ints=[1]), gamma_rank_1d)
    keepdims = op.Concat(op.Gather(x_shape, lead_axes), ones, axis=0)
    rstd_k = op.Reshape(rstd, keepdims, allowzero=1)

    xhat = x_f * rstd_k
    g = dy_f * gamma_f
    # Max(.., 1) keeps a zero-size normalized extent from producing 0/0.
    count = op.Max(op.Cast(op.Size(gamma_f), to=FLOAT.dtype), op.Constant(value_float=1.0))
    mean_gx = op.ReduceSum(g * xhat, norm_axes, keepdims=1) / count
    dx = op.CastLike(rstd_k * (g - xhat * mean_gx), x)
    # noop_with_empty_axes=1: with n == 0 there is nothing to sum over.
    dgamma = op.ReduceSum(dy_f * xhat, lead_axes, keepdims=0, noop_with_empty_axes=1)
    return dx, dgamma
