"""RMSNorm as exporters spell it, and the standard RMSNormalization, rewritten to ``RmsNorm``.

Decomposed: ``x * rsqrt(mean(x^2, -1) + eps) * scale`` with optional Casts around the float32
computation (Hugging Face's LlamaRMSNorm), ``x^2`` as Pow or Mul, ``rsqrt`` as Reciprocal(Sqrt)
or a Div by the Sqrt, the scale applied before the narrowing Cast (Gemma: ``(1 + w) * n``) or
after it. RmsNorm normalizes in float32 whatever the input type, which is what the casts ask for;
it rounds once where a narrowing Cast before the scale rounded twice."""

from __future__ import annotations

import onnx
import onnx_ir as ir
from onnxscript.rewriter import pattern

from ..domain import DOMAIN
from .values import allows_types, constant_list, dims, elem_type, is_last_axis, same_dim, scalar

_FLOAT32 = ir.DataType.FLOAT
# The standard RMSNormalization's default epsilon (RmsNorm's own differs): what a node mapped onto
# RmsNorm, here or by the gradient rule, gets when it sets none.
RMS_NORMALIZATION_EPSILON = onnx.defs.get_schema("RMSNormalization", 23).attributes["epsilon"].default_value.f


class DecomposedRmsNorm(pattern.RewriteRuleClassBase):
    def __init__(self, name: str, *, cast_last: bool):
        super().__init__(name)
        self._cast_last = cast_last

    def pattern(self, op, x, scale, two, axes, epsilon):
        # Every OrValue has a tag_var: onnxscript 0.7 cannot commute an untagged one.
        wide = pattern.OrValue([op.Cast(x), x], name="wide", tag_var="widened")
        square = pattern.OrValue([op.Pow(wide, two), op.Mul(wide, wide)], tag_var="squared_by_pow")
        mean = op.ReduceMean(square, axes, _outputs=["mean"])
        rms = op.Sqrt(op.Add(mean, epsilon))
        normalized = pattern.OrValue([op.Mul(wide, op.Reciprocal(rms)), op.Div(wide, rms)], tag_var="divided")
        if self._cast_last:
            return op.Cast(op.Mul(normalized, scale), _outputs=["out"])
        return op.Mul(
            pattern.OrValue([op.Cast(normalized), normalized], tag_var="narrowed"), scale, _outputs=["out"]
        )

    def check(self, context, x, scale, wide, axes, epsilon, mean, out, squared_by_pow, two=None, **_):
        result = pattern.MatchResult()
        shape, scale_dims = dims(wide), dims(scale)
        if shape is None or scale_dims is None:
            return result.fail("unknown rank")
        if squared_by_pow == 0 and scalar(two) != 2:
            return result.fail("the power is not 2")
        if not is_last_axis(constant_list(axes), len(shape)):
            return result.fail("the mean is not over the last axis alone")
        if mean.producer().attributes.get_int("keepdims", 1) != 1:
            return result.fail("the mean drops its axis")
        if not isinstance(scalar(epsilon), float):
            return result.fail("epsilon is not a float constant")
        if wide is not x and elem_type(wide) != _FLOAT32:
            return result.fail("the norm is computed in a type other than float32")
        if len(scale_dims) != 1 or not same_dim(scale_dims[0], shape[-1]):
            return result.fail("the scale is not one value per element of the last axis")
        # RmsNorm's y has its input's type: x's, or the widened x's when the pattern ends wide.
        target = elem_type(out) or elem_type(scale)
        self._source = next((v for v in (x, wide) if elem_type(v) == target), None)
        if self._source is None or not allows_types("RmsNorm", x=self._source, gamma=scale):
            return result.fail("no input of the output's type pairs with the scale's type")
        return result

    def rewrite(self, op, x, wide, scale, epsilon, **_):
        # The widening Cast is among the matched nodes, which the rewriter removes: make it anew.
        source = x if self._source is x else op.Cast(x, to=_FLOAT32.value)
        y, _rstd = op.RmsNorm(source, scale, epsilon=scalar(epsilon), _domain=DOMAIN, _outputs=2)
        return y


class StandardRmsNorm(pattern.RewriteRuleClassBase):
    """RMSNormalization-23 over the trailing axes that its scale spans exactly."""

    def pattern(self, op, x, scale):
        return op.RMSNormalization(x, scale, _outputs=["out"])

    def check(self, context, x, scale, out, **_):
        result = pattern.MatchResult()
        node = out.producer()
        shape, scale_dims = dims(x), dims(scale)
        if shape is None or scale_dims is None:
            return result.fail("unknown rank")
        axis = node.attributes.get_int("axis", -1)
        axis = axis + len(shape) if axis < 0 else axis
        if len(scale_dims) != len(shape) - axis or not all(map(same_dim, scale_dims, shape[axis:])):
            return result.fail("the scale does not span the normalized axes exactly")
        if node.attributes.get_int("stash_type", 1) != _FLOAT32.value:
            return result.fail("the norm is computed in a type other than float32")
        # Y has the scale's type, RmsNorm's y the input's.
        if elem_type(x) != elem_type(scale) or not allows_types("RmsNorm", x=x, gamma=scale):
            return result.fail("the input and scale types do not map onto RmsNorm")
        return result

    def rewrite(self, op, x, scale, out, **_):
        epsilon = out.producer().attributes.get_float("epsilon", RMS_NORMALIZATION_EPSILON)
        y, _rstd = op.RmsNorm(x, scale, epsilon=epsilon, _domain=DOMAIN, _outputs=2)
        return y


RMS_NORM_RULES = [
    DecomposedRmsNorm.rule("RmsNormScaleAfterCast", cast_last=False),
    DecomposedRmsNorm.rule("RmsNormScaleBeforeCast", cast_last=True),
    StandardRmsNorm.rule(),
]
