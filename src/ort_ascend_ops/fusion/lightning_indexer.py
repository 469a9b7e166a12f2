"""The DeepSeek-V3.2 (DSA) indexer's scoring and top-k rewritten to ``LightningIndexer``.

transformers' ``DeepseekV32Indexer`` exports as

```
scores = Relu(MatMul(q [B,S1,H,D], Unsqueeze(Transpose(k [B,S2,D], [0,2,1]), 1)) * scale)
index  = Squeeze(MatMul(Unsqueeze(w [B,S1,H], -2), scores), -2)          # sum_h w * scores
_, idx = TopK(index + causal_mask, K)                                      # the values unused
```

(with SDPA attention, transformers' default, the mask is boolean: ``Where(Not(mask), -inf, index)``)

and becomes ``LightningIndexer(q, k [B,S2,1,D], w * scale)`` (BSND, sparse_mode 3,
sparse_count K): ``relu(s * a) = s * relu(a)`` for a positive scale ``s``, so the scale moves into
the weights, where the op expects every scale. The mask must be a constant that is exactly
causal (what a static-shape export folds to): 0 on the keys at or before each query's position,
and on the others a value low enough that no score climbs over it (-inf, or float16's lowest
finite value or below; transformers adds its dtype's lowest). Then both pick the same keys, ties
to the lower index as ONNX's TopK breaks them; where a query has fewer allowed keys than K, the
op's extra slots hold -1 where TopK names masked keys.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnxscript.rewriter import pattern

from ..domain import DOMAIN
from .values import EXCLUDED, allows_types, constant_list, dims, scalar


def _constant(value: ir.Value | None) -> np.ndarray | None:
    """A constant's array, or a Gather of one along an axis (transformers' ``mask[:, 0]``), or a
    Not of one (its boolean mask's excluded keys)."""
    if value is None:
        return None
    if value.const_value is not None:
        return value.const_value.numpy()
    node = value.producer()
    if node is None or node.domain != "":
        return None
    if node.op_type == "Gather" and len(node.inputs) == 2:
        data, index = (_constant(v) for v in node.inputs)
        if data is not None and index is not None:
            try:
                return np.take(data, index, axis=node.attributes.get_int("axis", 0))
            except (IndexError, ValueError, TypeError):  # a Gather ONNX Runtime would refuse too
                return None
    if node.op_type == "Not":
        data = _constant(node.inputs[0])
        return None if data is None else np.logical_not(data)
    return None


def _additive(masking: int, mask, condition, fill) -> np.ndarray | None:
    """The mask as the scores' addend, whichever way the graph applies it."""
    if masking == 0:
        return _constant(mask)
    keep, value = _constant(condition), scalar(fill)
    if keep is None or keep.dtype != np.bool_ or not isinstance(value, float):
        return None
    if masking == 1:  # Where(excluded, fill, index)
        keep = ~keep
    return np.where(keep, 0.0, value)


def _is_causal(mask: np.ndarray, batch: int, s1: int, s2: int) -> bool:
    """Whether ``mask``, broadcast to ``[batch, s1, s2]``, keeps exactly the keys
    ``s <= s2 - s1 + position`` (sparse_mode 3) and excludes the others."""
    try:
        full = np.broadcast_to(mask, (batch, s1, s2))
    except ValueError:
        return False
    allowed = np.arange(s2)[None, :] <= (s2 - s1) + np.arange(s1)[:, None]
    return bool(np.all(full[:, allowed] == 0) and np.all(full[:, ~allowed] <= EXCLUDED))


def _axes_are(value: ir.Value | None, rank: int, axis: int) -> bool:
    axes = constant_list(value)
    return axes is not None and len(axes) == 1 and axes[0] % rank == axis


class IndexerTopK(pattern.RewriteRuleClassBase):
    def pattern(
        self, op, query, key, weights, scale, key_axis, weight_axis, head_axis, mask, condition, fill, k
    ):
        keys = op.Unsqueeze(op.Transpose(key, _outputs=["keys_t"]), key_axis)
        scores = op.Relu(op.Mul(op.MatMul(query, keys), scale))
        index = op.Squeeze(op.MatMul(op.Unsqueeze(weights, weight_axis), scores), head_axis)
        masked = pattern.OrValue(
            [op.Add(index, mask), op.Where(condition, fill, index), op.Where(condition, index, fill)],
            tag_var="masking",
        )
        return op.TopK(masked, k, _outputs=["values", "indices"])

    def check(
        self, context, query, key, weights, scale, key_axis, weight_axis, head_axis, k, keys_t, values,
        indices, masking, mask=None, condition=None, fill=None, **_,
    ):  # fmt: skip
        result = pattern.MatchResult()
        q, kd, w = dims(query), dims(key), dims(weights)
        if q is None or kd is None or w is None or len(q) != 4 or len(kd) != 3 or len(w) != 3:
            return result.fail("query, key and weights are not [B,S1,H,D], [B,S2,D] and [B,S1,H]")
        if not all(isinstance(d, int) for d in [*q, *kd, *w]):
            return result.fail("the shapes are not static (the causal mask is checked on them)")
        (b, s1, heads, d), (_, s2, _) = q, kd
        if kd != [b, s2, d] or w != [b, s1, heads]:
            return result.fail("query, key and weights disagree on B, S1, H or D")
        if list(keys_t.producer().attributes.get_ints("perm", ())) != [0, 2, 1]:
            return result.fail("the key is not transposed to [B,D,S2]")
        if not (_axes_are(key_axis, 4, 1) and _axes_are(weight_axis, 4, 2) and _axes_are(head_axis, 4, 2)):
            return result.fail("the key or weights are not unsqueezed to broadcast over heads")
        factor = scalar(scale)
        if not isinstance(factor, float) or not factor > 0:
            return result.fail("the scores' scale is not a positive constant")
        top = indices.producer()
        count = scalar(k)
        if top.attributes.get_int("axis", -1) % 3 != 2 or top.attributes.get_int("largest", 1) != 1:
            return result.fail("the top-k is not of the largest scores along the keys")
        if top.attributes.get_int("sorted", 1) != 1 or not isinstance(count, int) or not 0 < count <= s2:
            return result.fail("the top-k is not sorted, or its k is not a constant within the keys")
        if values.uses() or values.is_graph_output():
            return result.fail("the top-k scores are used (the op's differ on masked slots)")
        constant = _additive(masking, mask, condition, fill)
        if constant is None or not _is_causal(constant, b, s1, s2):
            return result.fail("the mask is not a constant causal mask")
        if not allows_types("LightningIndexer", query=query, key=key, weights=weights):
            return result.fail("query, key and weights are not of one type the op takes")
        self._count = count
        return result

    def rewrite(self, op, query, key, weights, scale, **_):
        selected, values = op.LightningIndexer(
            query,
            op.Unsqueeze(key, op.Constant(value_ints=[2])),
            op.Mul(weights, scale),
            layout="BSND",
            sparse_mode=3,
            sparse_count=self._count,
            _domain=DOMAIN,
            _outputs=2,
        )
        return values, op.Cast(selected, to=ir.DataType.INT64.value)


LIGHTNING_INDEXER_RULES = [IndexerTopK.rule()]
