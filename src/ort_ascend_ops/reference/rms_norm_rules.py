"""The rules RmsNorm and RmsNormGrad share (checks.py tells how they become ONNX)."""

from onnxscript import script

from ._opset import ascend, op
from .checks import TYPE_FLOAT32, All, Check, ElemType, IsFloatT, SameVector


@script(opset=ascend, default_opset=op)
def NormRules(x, gamma):
    """x's shape and n = rank(x) - rank(gamma) (1-D), once the types and shapes of x and gamma
    are checked against the contract."""
    x_type = ElemType(x)
    gamma_type = ElemType(gamma)
    pair = op.Or(op.Equal(gamma_type, x_type), op.Equal(gamma_type, op.Constant(value_int=TYPE_FLOAT32)))
    x_shape = Check(op.Shape(x), IsFloatT(x_type), rule="input 'x' must be float32, float16 or bfloat16")
    x_shape = Check(
        x_shape,
        pair,
        rule="inputs 'x' and 'gamma' are not an allowed (T, TG) pair; allowed: (float32, float32), "
        "(float16, float16), (float16, float32), (bfloat16, bfloat16), (bfloat16, float32)",
    )
    # Ranks as 1-D [rank]: ONNX Runtime 1.32 propagates Size(Shape(.)) at load time as the
    # tensor's element count.
    rank_x = op.Shape(x_shape)
    gamma_shape = op.Shape(gamma)
    rank_gamma = op.Shape(gamma_shape)
    x_shape = Check(
        x_shape,
        All(op.Greater(rank_x, op.Constant(value_ints=[0]))),
        rule="input 'x' must have rank >= 1",
    )
    ranks = op.And(op.Greater(rank_gamma, op.Constant(value_ints=[0])), op.LessOrEqual(rank_gamma, rank_x))
    x_shape = Check(x_shape, All(ranks), rule="input 'gamma' must have 1 <= rank(gamma) <= rank(x)")
    x_shape = Check(
        x_shape,
        SameVector(gamma_shape, op.Slice(x_shape, rank_x - rank_gamma, rank_x)),
        rule="input 'gamma' must have the shape x.shape[n:], n = rank(x) - rank(gamma)",
    )
    # n from the checked shape, so that what follows waits for every check.
    return x_shape, op.Shape(x_shape) - rank_gamma
