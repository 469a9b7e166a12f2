"""Rotary embeddings rewritten to ``RotaryPositionEmbedding``.

``x * cos + rotate(x) * sin`` with ``rotate`` the rotate-half of Llama-family models (our mode 0:
``cat(-x2, x1)``) or the interleaved rotate-every-two of GPT-J (our mode 1), cos and sin computed
in the graph or folded to constants; and the standard RotaryEmbedding-23, its half-width caches
widened to the full-width tables our op takes. The contract's broadcast (cos and sin of one
shape, broadcasting to x's shape, the last axis whole) is checked on the shapes known now; a
dim that is 1 broadcasts, any other must equal x's."""

from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter import pattern

from ..domain import DOMAIN
from .values import constant_list, dims, elem_type, is_last_axis, known_rank, same_dim

HALF, INTERLEAVE, INTERLEAVE_HALF = 0, 1, 3  # our modes


def _slice_is(node: ir.Node, rank: int, length: int, start: int, end: int, step: int) -> bool:
    """Whether the Slice takes [start, end) with ``step`` along the last axis, of ``length``."""
    inputs = list(node.inputs) + [None] * (5 - len(node.inputs))
    starts, ends, axes, steps = (constant_list(v) for v in inputs[1:5])
    on_last = is_last_axis(axes, rank) if inputs[3] is not None else rank == 1
    if (
        not on_last
        or (steps or [1]) != [step]
        or not starts
        or not ends
        or len(starts) != 1
        or len(ends) != 1
    ):
        return False

    def clamped(i: int) -> int:
        return max(0, min(i + length if i < 0 else i, length))

    return clamped(starts[0]) == start and clamped(ends[0]) == end


def _tables_fit(x: ir.Value, cos: ir.Value, sin: ir.Value, *, half_width: bool = False) -> str | None:
    """Why cos and sin cannot be the op's tables for x, or None when they can; ``half_width``:
    tables of half x's last axis, which the rewrite widens (their last axis counts as x's)."""
    x_dims, cos_dims, sin_dims = dims(x), dims(cos), dims(sin)
    if half_width and x_dims and cos_dims and sin_dims:
        if not (same_dim(cos_dims[-1], x_dims[-1] // 2) and same_dim(sin_dims[-1], x_dims[-1] // 2)):
            return "the tables are not half as wide as x"
        cos_dims, sin_dims = ([*t[:-1], x_dims[-1]] for t in (cos_dims, sin_dims))
    if x_dims is None or cos_dims is None or sin_dims is None:
        return "unknown ranks"
    if len(x_dims) not in (3, 4) or len(cos_dims) != len(x_dims):
        return "x is not 3-D or 4-D, or the tables are not of its rank"
    if len(cos_dims) != len(sin_dims) or not all(map(same_dim, cos_dims, sin_dims)):
        return "cos and sin differ in shape"
    if not all(c == 1 or same_dim(c, d) for c, d in zip(cos_dims, x_dims, strict=True)):
        return "the tables do not broadcast to x's shape"
    if not same_dim(cos_dims[-1], x_dims[-1]):
        return "the tables broadcast along the last axis"
    if not (elem_type(x) == elem_type(cos) == elem_type(sin)) or elem_type(x) is None:
        return "x, cos and sin differ in type"
    return None


class _Rope(pattern.RewriteRuleClassBase):
    """y = x * cos + rotated * sin, ``rotated`` given by the subclass' ``rotated`` pattern."""

    mode: int

    def pattern(self, op, x, cos, sin):
        return op.Add(op.Mul(x, cos), op.Mul(self.rotated(op, x), sin))

    def check(self, context, x, cos, sin, **bindings):
        result = pattern.MatchResult()
        shape = dims(x)
        head = shape[-1] if shape else None
        if not shape or not isinstance(head, int) or head % 2:
            return result.fail("the head size is not a static even number")
        if not self.rotates(shape, head, **bindings):
            return result.fail("x is not rotated as the mode rotates it")
        reason = _tables_fit(x, cos, sin)
        return result.fail(reason) if reason else result

    def rewrite(self, op, x, cos, sin, **_):
        return op.RotaryPositionEmbedding(x, cos, sin, mode=self.mode, _domain=DOMAIN)


class RotateHalfRope(_Rope):
    mode = HALF

    def rotated(self, op, x):
        first = op.Slice(x, _allow_other_inputs=True, _outputs=["first"])
        second = op.Slice(x, _allow_other_inputs=True, _outputs=["second"])
        return op.Concat(op.Neg(second), first, _outputs=["rotated"])

    def rotates(self, shape, head, first, second, rotated, **_):
        rank = len(shape)
        return (
            _slice_is(first.producer(), rank, head, 0, head // 2, 1)
            and _slice_is(second.producer(), rank, head, head // 2, head, 1)
            and rotated.producer().attributes.get_int("axis") in (-1, rank - 1)
        )


class RotateEveryTwoRope(_Rope):
    """GPT-J's ``stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)``."""

    mode = INTERLEAVE

    def rotated(self, op, x):
        even = op.Slice(x, _allow_other_inputs=True, _outputs=["even"])
        odd = op.Slice(x, _allow_other_inputs=True, _outputs=["odd"])
        pairs = op.Concat(
            op.Unsqueeze(op.Neg(odd), _allow_other_inputs=True, _outputs=["odd_axis"]),
            op.Unsqueeze(even, _allow_other_inputs=True, _outputs=["even_axis"]),
            _outputs=["pairs"],
        )
        return op.Reshape(pairs, _allow_other_inputs=True, _outputs=["rotated"])

    def rotates(self, shape, head, even, odd, odd_axis, even_axis, pairs, rotated, **_):
        rank = len(shape)
        rotated_dims = dims(rotated)
        new_axis = [constant_list(n.producer().inputs[1]) for n in (odd_axis, even_axis)]
        return (
            _slice_is(even.producer(), rank, head, 0, head, 2)
            and _slice_is(odd.producer(), rank, head, 1, head, 2)
            and all(a in ([-1], [rank]) for a in new_axis)
            and pairs.producer().attributes.get_int("axis") in (-1, rank)
            and rotated_dims is not None
            and len(rotated_dims) == rank
            and all(map(same_dim, rotated_dims, shape))
        )


class _HalvesRope(pattern.RewriteRuleClassBase):
    """``cat(a * c - b * s, b * c + a * s)`` over the last axis, ``a`` and ``b`` the two halves of
    x (contiguous: our mode 0, as GPT-OSS writes it) or its even and odd elements (mode 3, as
    DeepSeek-V3's interleaved MLA rope writes it), ``c`` and ``s`` half-width tables: the op with
    the tables widened to ``cat(c, c)`` and ``cat(s, s)``."""

    def pattern(self, op, x, c, s):
        a, b = self.halves(op, x)
        first = op.Sub(op.Mul(a, c), op.Mul(b, s))
        second = op.Add(op.Mul(b, c), op.Mul(a, s))
        return op.Concat(first, second, _outputs=["out"])

    def check(self, context, x, c, s, out, **bindings):
        result = pattern.MatchResult()
        shape = dims(x)
        head = shape[-1] if shape else None
        if not shape or not isinstance(head, int) or head % 2:
            return result.fail("the head size is not a static even number")
        if out.producer().attributes.get_int("axis") not in (-1, len(shape) - 1):
            return result.fail("the halves are not joined along the last axis")
        if not self.splits(shape, head, **bindings):
            return result.fail("a and b are not the halves the mode rotates")
        reason = _tables_fit(x, c, s, half_width=True)
        return result.fail(reason) if reason else result

    def rewrite(self, op, x, c, s, **_):
        cos, sin = (op.Concat(t, t, axis=-1) for t in (c, s))
        return op.RotaryPositionEmbedding(x, cos, sin, mode=self.mode, _domain=DOMAIN)


class SlicedHalvesRope(_HalvesRope):
    def __init__(self, name: str, *, mode: int):
        super().__init__(name)
        self.mode = mode

    def halves(self, op, x):
        return (
            op.Slice(x, _allow_other_inputs=True, _outputs=["a"]),
            op.Slice(x, _allow_other_inputs=True, _outputs=["b"]),
        )

    def splits(self, shape, head, a, b, **_):
        rank = len(shape)
        if self.mode == HALF:
            return _slice_is(a.producer(), rank, head, 0, head // 2, 1) and _slice_is(
                b.producer(), rank, head, head // 2, head, 1
            )
        return _slice_is(a.producer(), rank, head, 0, head, 2) and _slice_is(
            b.producer(), rank, head, 1, head, 2
        )


class SplitHalvesRope(_HalvesRope):
    """The halves as one Split (``torch.chunk(x, 2, -1)``)."""

    mode = HALF

    def halves(self, op, x):
        return op.Split(x, _allow_other_inputs=True, _outputs=["a", "b"])

    def splits(self, shape, head, a, **_):
        node = a.producer()
        if node.attributes.get_int("axis", 0) not in (-1, len(shape) - 1):
            return False
        sizes = constant_list(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
        return sizes == [head // 2] * 2 or (sizes is None and node.attributes.get_int("num_outputs", 0) == 2)


class StandardRope(pattern.RewriteRuleClassBase):
    """RotaryEmbedding-23 (X, cos_cache, sin_cache[, position_ids]) of full rotation. Its caches
    hold D/2 values per position; our tables hold D, broadcast over the heads (and over the batch
    where the caches have one row, which stock ONNX Runtime refuses)."""

    def pattern(self, op, x, cos_cache, sin_cache):
        return op.RotaryEmbedding(x, cos_cache, sin_cache, _allow_other_inputs=True, _outputs=["out"])

    def check(self, context, x, cos_cache, sin_cache, out, **_):
        result = pattern.MatchResult()
        node, shape = out.producer(), dims(x)
        if shape is None or len(shape) not in (3, 4) or not isinstance(shape[-1], int):
            return result.fail("x is not 3-D or 4-D with a static last axis")
        heads = node.attributes.get_int("num_heads", 0)
        if len(shape) == 3 and (not heads or shape[-1] % heads):
            return result.fail("a 3-D x needs num_heads dividing its last axis")
        head = shape[-1] // heads if len(shape) == 3 else shape[-1]
        if node.attributes.get_int("rotary_embedding_dim", 0) not in (0, head) or head % 2:
            return result.fail("partial rotation, or an odd head size")
        if not (elem_type(x) == elem_type(cos_cache) == elem_type(sin_cache)):
            return result.fail("x and the caches differ in type")
        return result

    def rewrite(self, op, x, cos_cache, sin_cache, out, **_):
        node = out.producer()
        positions = node.inputs[3] if len(node.inputs) > 3 else None
        interleaved = bool(node.attributes.get_int("interleaved", 0))
        heads = node.attributes.get_int("num_heads", 0)
        four_d = known_rank(x) == 4
        head_axis = 1 if four_d else 2  # [B, N, S, D], or [B, S, N, D] from [B, S, N*D]
        tables = []
        for cache in (cos_cache, sin_cache):
            half = op.Gather(cache, positions, axis=0) if positions is not None else cache
            tables.append(
                op.Unsqueeze(_full_width(op, half, interleaved), op.Constant(value_ints=[head_axis]))
            )
        mode = INTERLEAVE if interleaved else HALF
        if four_d:
            return op.RotaryPositionEmbedding(x, *tables, mode=mode, _domain=DOMAIN)
        heads_x = op.Reshape(x, op.Constant(value_ints=[0, 0, heads, -1]))
        y = op.RotaryPositionEmbedding(heads_x, *tables, mode=mode, _domain=DOMAIN)
        return op.Reshape(y, op.Constant(value_ints=[0, 0, -1]))


def _full_width(op, half: ir.Value, interleaved: bool) -> ir.Value:
    """A [B, S, D/2] half table as [B, S, D]: each value twice in a row (interleaved), else the
    table twice over."""
    if not interleaved:
        return op.Concat(half, half, axis=-1)
    pairs = op.Unsqueeze(half, op.Constant(value_ints=[-1]))
    return op.Reshape(op.Concat(pairs, pairs, axis=-1), op.Constant(value_ints=[0, 0, -1]))


ROTARY_RULES = [
    RotateHalfRope.rule(),
    RotateEveryTwoRope.rule(),
    SlicedHalvesRope.rule("HalvesRope", mode=HALF),
    SlicedHalvesRope.rule("InterleavedHalvesRope", mode=INTERLEAVE_HALF),
    SplitHalvesRope.rule(),
    StandardRope.rule(),
]
