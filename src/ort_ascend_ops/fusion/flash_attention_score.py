"""Exported attention rewritten to ``FlashAttentionScore``.

Softmax attention as eager code and the exporter's ``scaled_dot_product_attention`` spell it:

```
out = MatMul(Dropout?(Cast?(Softmax(Cast?(scores + mask?), axis=-1))), v)
scores = MatMul(q, Transpose(k, [0,1,3,2])) * scale              # eager (Mul or Div)
scores = MatMul(q * sqrt(scale), Reshape(Transpose(Reshape(k))) * sqrt(scale))   # exporter
```

(the exporter's boolean-mask spelling adds ``Where(IsNaN(p), 0, p)`` after the Softmax: torch's
rule that a row without keys gives 0), and the standard ``Attention`` (opset 23: 4-D inputs, or
3-D with ``q_num_heads``/``kv_num_heads``). q, k and v are ``[B, N, S, D]`` as the exporter has
them, so the node is BNSD (BSH for a 3-D Attention) and needs no Transpose; key and value
repeated for grouped-query attention (transformers' ``repeat_kv``, the exporter's ``enable_gqa``:
``Reshape(Expand(Unsqueeze(k, 2)))``) are read from before the copy, N2 heads, ``head_num = N1``.
The scale is every constant factor of the scores (1 / sqrt(D) for an Attention without one).
A Dropout is taken only where it drops nothing (no training_mode, or ratio 0). The mask is
``flash_attention_score_mask``'s: a run-time mask only where the original gives 0 on a row
without keys (the exporter's SDPA, the standard Attention), which torch's SDPA gives too.
Anything else (softcapping, attention sinks, a bias, scores in another type than q's, a Dropout
that drops, a mask made of a LightningIndexer's selection) is left as it was."""

from __future__ import annotations

import dataclasses
import math

import onnx_ir as ir
from onnxscript.rewriter import pattern

from ..domain import DOMAIN
from .flash_attention_score_mask import MaskPlan, plan_constant, plan_value, read_addend
from .values import (
    allows_types,
    computed_from,
    constant_list,
    dims,
    elem_type,
    produced_by,
    same_dim,
    scalar,
)


def _scalar_factor(node: ir.Node) -> tuple[ir.Value, float] | None:
    """A Mul or Div by a one-element float constant: (the other operand, the factor it applies)."""
    a, b = node.inputs
    if node.op_type == "Mul" and isinstance(factor := scalar(a), float) and b is not None:
        return b, factor
    if isinstance(factor := scalar(b), float) and a is not None:
        return a, factor if node.op_type == "Mul" else 1.0 / factor
    return None


def _unscaled(value: ir.Value | None) -> tuple[ir.Value | None, float]:
    """``value`` without the constant factors applied to it, and their product."""
    factor = 1.0
    while (node := produced_by(value, "Mul", "Div")) is not None and (
        found := _scalar_factor(node)
    ) is not None:
        value, applied = found
        factor *= applied
    return value, factor


def _untransposed(value: ir.Value | None) -> ir.Value | None:
    """k where ``value`` is k [B, N, S, D] with its last two axes swapped: a Transpose, or the
    exporter's Reshape to [-1, S, D], Transpose and Reshape back to [B, N, D, S]."""
    node = produced_by(value, "Transpose", "Reshape")
    if node is None:
        return None
    if node.op_type == "Transpose":
        return node.inputs[0] if list(node.attributes.get_ints("perm", ())) == [0, 1, 3, 2] else None
    swap = produced_by(node.inputs[0], "Transpose")
    merged = produced_by(swap.inputs[0], "Reshape") if swap is not None else None
    if swap is None or merged is None or list(swap.attributes.get_ints("perm", ())) != [0, 2, 1]:
        return None
    key = merged.inputs[0]
    k, flat, out = dims(key), dims(merged.outputs[0]), dims(value)
    if k is None or flat is None or out is None or len(k) != 4 or len(flat) != 3 or len(out) != 4:
        return None
    # The merge keeps the last two axes and the split restores the first two: a swap of the last two.
    keeps = same_dim(flat[1], k[2]) and same_dim(flat[2], k[3])
    return key if keeps and all(map(same_dim, out, [k[0], k[1], k[3], k[2]])) else None


def _whole(value: ir.Value | None) -> ir.Value | None:
    """``value`` before the Slices that take all of it (``x[:, :, None]`` at dynamic shapes)."""
    while (node := produced_by(value, "Slice")) is not None:
        inputs = list(node.inputs) + [None] * (5 - len(node.inputs))
        starts, ends, steps = (constant_list(inputs[i]) for i in (1, 2, 4))
        if not (starts and set(starts) == {0} and ends and min(ends) >= 2**62 and set(steps or [1]) == {1}):
            break
        value = node.inputs[0]
    return value


def _unrepeated(value: ir.Value) -> tuple[ir.Value, int]:
    """(kv, G) where ``value`` is kv [B, N2, S, D] with each head repeated G times in a row, as
    ``Reshape(Expand(Unsqueeze(kv, [2]), [B, N2, G, S, D]), [B, N2 * G, S, D])``; else (value, 1)."""
    reshape = produced_by(value, "Reshape")
    expand = produced_by(_whole(reshape.inputs[0]), "Expand") if reshape is not None else None
    unsqueeze = produced_by(_whole(expand.inputs[0]), "Unsqueeze") if expand is not None else None
    if (
        expand is None
        or unsqueeze is None
        or len(unsqueeze.inputs) != 2
        or constant_list(unsqueeze.inputs[1]) not in ([2], [-3])
    ):
        return value, 1
    source = _whole(unsqueeze.inputs[0])
    s, e, r = dims(source), _expanded(expand), dims(value)
    if source is None or s is None or e is None or r is None or (len(s), len(e), len(r)) != (4, 5, 4):
        return value, 1
    if not (isinstance(e[1], int) and isinstance(e[2], int) and e[1] == s[1]):
        return value, 1
    if all(map(same_dim, [e[0], e[3], e[4]], [s[0], s[2], s[3]])) and all(
        map(same_dim, r, [s[0], e[1] * e[2], s[2], s[3]])
    ):
        return source, e[2]
    return value, 1


def _target(shape: ir.Value | None) -> list | None:
    """An Expand's target shape, None for each entry not known now: a constant, or a Concat of
    one-element pieces (the exporter's at dynamic shapes)."""
    if (whole := constant_list(shape)) is not None:
        return whole
    concat = produced_by(shape, "Concat")
    if concat is None:
        return None
    pieces = [constant_list(piece) for piece in concat.inputs]
    if any(piece is not None and len(piece) != 1 for piece in pieces):
        return None
    return [piece[0] if piece is not None else None for piece in pieces]


def _expanded(expand: ir.Node) -> list | None:
    """The Expand's output dims, its target's where inference left a dim unknown (a target dim
    above 1 is the output's)."""
    e, target = dims(expand.outputs[0]), _target(expand.inputs[1])
    if e is None or target is None or len(target) != len(e):
        return e
    return [
        t if not isinstance(d, int) and t is not None and t > 1 else d for d, t in zip(e, target, strict=True)
    ]


def _heads(key: ir.Value, value: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Key and value before their repetition when both repeat their heads alike."""
    (k, gk), (v, gv) = _unrepeated(key), _unrepeated(value)
    return (k, v) if gk == gv else (key, value)


def _unused(values) -> bool:
    return all(v is None or not (v.uses() or v.is_graph_output()) for v in values)


def _drops_nothing(node: ir.Node) -> bool:
    """A Dropout that is the identity: not training (no training_mode, or a false one), or ratio 0."""
    inputs = list(node.inputs) + [None] * (3 - len(node.inputs))
    ratio, training = inputs[1], inputs[2]
    idle = training is None or constant_list(training) == [False]
    return (idle or scalar(ratio) == 0) and _unused(node.outputs[1:])


def _is_nan_guard(node: ir.Node) -> bool:
    """``Where(IsNaN(p), 0, p)``."""
    test = produced_by(node.inputs[0], "IsNaN")
    return test is not None and test.inputs[0] is node.inputs[2] and scalar(node.inputs[1]) == 0


def _softmax(probabilities: ir.Value | None) -> tuple[ir.Node, bool] | str:
    """The Softmax the probabilities come from through Casts, identity Dropouts and the NaN guard,
    and whether the guard is there."""
    guarded, value = False, probabilities
    while True:
        node = produced_by(value, "Softmax", "Cast", "Dropout", "Where")
        if node is None:
            return "the probabilities are not a Softmax's"
        if node.op_type == "Softmax":
            return node, guarded
        if node.op_type == "Dropout" and not _drops_nothing(node):
            return "a Dropout that drops"
        if node.op_type == "Where":
            if not _is_nan_guard(node):
                return "a Where other than the NaN guard after the Softmax"
            guarded = True
        value = node.inputs[2] if node.op_type == "Where" else node.inputs[0]


def _selected(mask: MaskPlan) -> bool:
    """A mask made of a LightningIndexer's selection: that attention stays a Softmax, whose
    probabilities the indexer's warm-up loss reads (training/indexer_warmup.py)."""
    return mask.value is not None and computed_from(mask.value, DOMAIN, "LightningIndexer")


@dataclasses.dataclass(frozen=True)
class _Fused:
    """The node to make: BNSD or BSH inputs, the attributes beside the mask's."""

    query: ir.Value
    key: ir.Value
    value: ir.Value
    heads: int
    layout: str
    scale: float
    mask: MaskPlan

    def make(self, op) -> ir.Value:
        seq_axis = 2 if self.layout == "BNSD" else 1
        mask = self.mask.atten_mask(op, self.query, self.key, seq_axis)
        out, _max, _sum = op.FlashAttentionScore(
            self.query,
            self.key,
            self.value,
            *([mask] if mask is not None else []),
            head_num=self.heads,
            input_layout=self.layout,
            scale_value=self.scale,
            **self.mask.attributes(),
            _domain=DOMAIN,
            _outputs=3,
        )
        return out


def _types_fit(query: ir.Value, key: ir.Value, value: ir.Value, out: ir.Value) -> bool:
    types = {elem_type(v) for v in (query, key, value, out)}
    return len(types) == 1 and allows_types("FlashAttentionScore", query=query, key=key, value=value)


def _bnsd(query, key, value, out) -> list | str:
    """[B, N1, S1, S2] of the scores where q [B, N1, S1, D], k [B, N, S2, D], v [B, N, S2, Dv]
    and out [B, N1, S1, Dv] agree (N = N1, or N1's divisor for a key and value of N2 heads)."""
    q, k, v, o = (dims(x) or [] for x in (query, key, value, out))
    if any(len(d) != 4 for d in (q, k, v, o)):
        return "q, k, v or the output is not 4-D"
    heads = q[1]
    if not isinstance(heads, int) or not isinstance(k[1], int) or not k[1] or heads % k[1] or k[1] != v[1]:
        return "the heads are not static, or the key's do not divide the query's"
    if not (same_dim(q[0], k[0]) and same_dim(k[0], v[0]) and same_dim(q[3], k[3]) and same_dim(k[2], v[2])):
        return "q, k and v disagree on B, S2 or D"
    if not all(map(same_dim, o, [q[0], heads, q[2], v[3]])):
        return "the output is not [B, N1, S1, Dv]"
    return [q[0], heads, q[2], k[2]]


class SoftmaxAttention(pattern.RewriteRuleClassBase):
    def pattern(self, op, probabilities, value):
        return op.MatMul(probabilities, value, _outputs=["out"])

    def check(self, context, probabilities, value, out, **_):
        result = pattern.MatchResult()
        found = _softmax(probabilities)
        if isinstance(found, str):
            return result.fail(found)
        softmax, guarded = found
        logits: ir.Value | None = softmax.inputs[0]
        shape = dims(logits)
        if shape is None or len(shape) != 4 or softmax.attributes.get_int("axis", None) not in (-1, 3):
            return result.fail("the Softmax is not over the last axis of 4-D scores")
        while (cast := produced_by(logits, "Cast")) is not None:
            logits = cast.inputs[0]
        parsed = self._scores(logits, shape)
        if isinstance(parsed, str):
            return result.fail(parsed)
        query, key, scale, addend = parsed
        key, value = _heads(key, value)
        scores = _bnsd(query, key, value, out)
        if isinstance(scores, str):
            return result.fail(scores)
        if not _types_fit(query, key, value, out):
            return result.fail("q, k, v and the output are not of one type the op takes")
        mask = self._mask(addend, scores, guarded)
        if isinstance(mask, str):
            return result.fail(mask)
        if _selected(mask):
            return result.fail("the mask is a LightningIndexer's selection")
        self._fused = _Fused(query, key, value, scores[1], "BNSD", scale, mask)
        return result

    @staticmethod
    def _scores(logits: ir.Value | None, shape: list):
        """(q, k, scale, mask addend or None) of ``q . k * scale + mask``, or a reason."""
        add = produced_by(logits, "Add")
        candidates = (
            [(add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])] if add else [(logits, None)]
        )
        for scores, addend in candidates:
            product, scale = _unscaled(scores)
            matmul = produced_by(product, "MatMul")
            if matmul is None:
                continue
            query, q_scale = _unscaled(matmul.inputs[0])
            transposed, k_scale = _unscaled(matmul.inputs[1])
            key = _untransposed(transposed)
            if key is None:
                return "the key is not transposed over its last two axes"
            key, k_inner = _unscaled(key)
            if query is None or key is None:
                return "q or k is missing"
            product_dims = dims(product)
            if product_dims is None or not all(map(same_dim, product_dims, shape)):
                return "the mask broadcasts the scores to another shape"
            return query, key, scale * q_scale * k_scale * k_inner, addend
        return "the Softmax does not read q . k, scaled and masked"

    @staticmethod
    def _mask(addend: ir.Value | None, scores: list, guarded: bool) -> MaskPlan | str:
        if addend is None:
            return MaskPlan()
        read = read_addend(addend, scores)
        if isinstance(read, str):
            return read
        if read.causal:
            return MaskPlan(sparse_mode=2)
        if read.constant is not None:
            return plan_constant(read.constant, scores, rows_zero=guarded)
        if not guarded:
            return (
                "a mask computed at run time may leave a row without keys, which the original does not give 0"
            )
        return plan_value(read.value, read.negate, scores)

    def rewrite(self, op, **_):
        return self._fused.make(op)


class StandardAttention(pattern.RewriteRuleClassBase):
    """Attention-23 without a cache, softcap or the scores output."""

    def pattern(self, op, query, key, value):
        return op.Attention(query, key, value, _allow_other_inputs=True, _outputs=["out"])

    def check(self, context, query, key, value, out, **_):
        result = pattern.MatchResult()
        node = out.producer()
        inputs = list(node.inputs) + [None] * (7 - len(node.inputs))
        if any(v is not None for v in inputs[4:]) or not _unused(node.outputs[1:]):
            return result.fail("a cache, the sequence lengths or the scores output")
        if node.attributes.get_float("softcap", 0.0) != 0.0:
            return result.fail("softcapping")
        rank = len(dims(query) or ())
        if rank == 4:
            key, value = _heads(key, value)
            scores = _bnsd(query, key, value, out)
            layout, head_dim = "BNSD", (dims(query) or [None] * 4)[3]
        elif rank == 3:
            scores, head_dim = self._bsh(node, query, key, value, out)
            layout = "BSH"
        else:
            return result.fail("q is neither 3-D nor 4-D")
        if isinstance(scores, str):
            return result.fail(scores)
        if not _types_fit(query, key, value, out):
            return result.fail("q, k, v and the output are not of one type the op takes")
        scale = node.attributes.get_float("scale", None)
        if scale is None:
            if not isinstance(head_dim, int) or head_dim <= 0:
                return result.fail("no scale, and the head size is not static")
            scale = 1.0 / math.sqrt(head_dim)
        mask = self._mask(inputs[3], scores, bool(node.attributes.get_int("is_causal", 0)))
        if isinstance(mask, str):
            return result.fail(mask)
        if _selected(mask):
            return result.fail("the mask is a LightningIndexer's selection")
        self._fused = _Fused(query, key, value, scores[1], layout, scale, mask)
        return result

    @staticmethod
    def _bsh(node: ir.Node, query, key, value, out):
        """(scores [B, N1, S1, S2], D) of 3-D q [B, S1, N1 * D], k [B, S2, N2 * D], v [B, S2, N2 * Dv]."""
        q, k, v, o = (dims(x) or [] for x in (query, key, value, out))
        heads, kv_heads = (node.attributes.get_int(a, 0) for a in ("q_num_heads", "kv_num_heads"))
        if any(len(d) != 3 or not isinstance(d[2], int) for d in (q, k, v, o)):
            return "q, k, v or the output is not 3-D with a static last axis", None
        if (
            not heads
            or not kv_heads
            or heads % kv_heads
            or q[2] % heads
            or k[2] != kv_heads * (q[2] // heads)
        ):
            return "the heads do not split q and k into heads of one size", None
        if v[2] % kv_heads or o[2] != heads * (v[2] // kv_heads):
            return "the value's heads do not make the output's", None
        if not (same_dim(q[0], k[0]) and same_dim(k[0], v[0]) and same_dim(k[1], v[1])):
            return "q, k and v disagree on B or S2", None
        if not (same_dim(o[0], q[0]) and same_dim(o[1], q[1])):
            return "the output is not [B, S1, N1 * Dv]", None
        return [q[0], heads, q[1], k[1]], q[2] // heads

    @staticmethod
    def _mask(mask: ir.Value | None, scores: list, causal: bool) -> MaskPlan | str:
        """Attention's mask: a boolean (true where allowed) or an addend, and is_causal (top left:
        no cache, so no offset). A row without keys gives 0 for a boolean or -inf mask."""
        if mask is None:
            return MaskPlan(sparse_mode=2 if causal else 0)
        if elem_type(mask) == ir.DataType.BOOL:
            if mask.const_value is not None:
                return plan_constant(mask.const_value.numpy(), scores, rows_zero=True, causal=causal)
            plan = plan_value(mask, negate=True, scores=scores)
        else:
            read = read_addend(mask, scores)
            if isinstance(read, str):
                return read
            if read.causal:
                return MaskPlan(sparse_mode=2)
            if read.constant is not None:
                return plan_constant(read.constant, scores, rows_zero=read.infinite, causal=causal)
            if not read.infinite:
                return "a mask computed at run time may leave a row without keys, which the original does not give 0"
            plan = plan_value(read.value, read.negate, scores)
        # With a mask, next_tokens = 0 bands it to the keys up to the row's: is_causal.
        return dataclasses.replace(plan, next_tokens=0) if causal and not isinstance(plan, str) else plan

    def rewrite(self, op, **_):
        return self._fused.make(op)


FLASH_ATTENTION_RULES = [SoftmaxAttention.rule(), StandardAttention.rule()]
