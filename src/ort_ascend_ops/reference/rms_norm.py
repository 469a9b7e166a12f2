"""Reference RmsNorm, written in onnxscript."""

from onnxscript import FLOAT, script

from ._opset import ascend, op


@script(opset=ascend, default_opset=op)
def RmsNorm(x, gamma, epsilon: float = 1e-6):
    """RMS normalization over the last rank(gamma) axes; computes in float32, y cast back to T."""
    # Everything below works on float32 copies: ONNX Runtime's CPU kernels (Size, for one)
    # do not all take bfloat16.
    x_f = op.Cast(x, to=FLOAT.dtype)
    gamma_f = op.Cast(gamma, to=FLOAT.dtype)
    # Ranks are only known at run time. Squeeze(Shape(Shape(.))) rather than Size(Shape(.)):
    # at load time ONNX Runtime 1.32 propagates the latter as the element count of the tensor.
    rank_x = op.Squeeze(op.Shape(op.Shape(x_f)))
    rank_gamma = op.Squeeze(op.Shape(op.Shape(gamma_f)))
    norm_axes = op.Range(rank_x - rank_gamma, rank_x, op.Constant(value_int=1))
    # Max(.., 1) defines the mean over a zero-size normalized extent as 0 instead of 0/0.
    count = op.Max(op.Cast(op.Size(gamma_f), to=FLOAT.dtype), op.Constant(value_float=1.0))
    mean_sq = op.ReduceSumSquare(x_f, norm_axes, keepdims=1) / count
    rstd = op.Reciprocal(op.Sqrt(mean_sq + epsilon))
    y = op.CastLike(x_f * rstd * gamma_f, x)
    return y, rstd
