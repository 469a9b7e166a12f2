"""A GroupedMatmul of transposed expert weights, ``GroupedMatmul(x, Transpose(W, perm=[0, 2, 1]))``
(transformers stores each expert's ``[out, in]`` matrix and hands ``_grouped_mm`` its transpose),
rewritten to read ``W`` as stored with ``transpose_weight = 1``, as ``aclnnGroupedMatmulV4`` reads
a transposed weight: no transposed copy of every expert's weights per step, and the weight
gradient comes out in ``W``'s own layout."""

from __future__ import annotations

from onnxscript.rewriter import pattern

from ..domain import DOMAIN


class TransposedWeights(pattern.RewriteRuleClassBase):
    def pattern(self, op, x, weight, group_list):
        transposed = op.Transpose(weight, perm=[0, 2, 1])
        return op.GroupedMatmul(x, transposed, group_list, _domain=DOMAIN, _outputs=["y"])

    def check(self, context, y, **_):
        result = pattern.MatchResult()
        if y.producer().attributes.get_int("transpose_weight", 0) != 0:
            return result.fail("the node already reads its weight transposed")
        return result

    def rewrite(self, op, x, weight, group_list, **_):
        return op.GroupedMatmul(x, weight, group_list, transpose_weight=1, _domain=DOMAIN)


GROUPED_MATMUL_RULES = [TransposedWeights.rule()]
