"""What an exported attention's mask lets each query row read, as ``FlashAttentionScore`` says it:
a sparse mode, an ``atten_mask`` (true where masked) and a band.

The mask arrives as the scores' addend (0 where allowed, ``-inf`` or a value at or below
``EXCLUDED`` where masked: transformers' ``finfo.min``, the exporter's ``dtype.min``) or as the
standard Attention's boolean (true where allowed), or as a Where of a boolean between 0 and such
a value, the boolean folded to a constant where a static export computes it from constants alone
(``passes._builds_mask``: transformers' causal mask, at any length). A constant is read key by
key: all allowed is no mask, causal from the bottom right or the top left is sparse_mode 3 or 2
without a mask (3 where both fit, as at S1 == S2), anything else the constant itself, banded as
tightly as its allowed keys lie (a sliding window: ``pre_tokens = window - 1``,
``next_tokens = 0``). A mask computed at run time (a padding mask, or any mask of a dynamic-shape
export) is passed as it is, negated, in a shape the op takes; the exporter's ``is_causal`` (a
lower Trilu of ones) is recognized as sparse_mode 2.

A row left without keys is where the spellings differ: the op gives it 0, torch's
scaled_dot_product_attention and the standard Attention with a boolean or ``-inf`` mask give 0,
but softmax over an addend of ``finfo.min`` gives the mean of the values (and its gradient
reaches q and k), and over ``-inf`` NaN. So a mask is fused only where the original also gives 0
there, or where no row can lose every key (a constant with a key in every row, causal)."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from .values import EXCLUDED, dims, produced_by, same_dim, scalar

# The band's "unbounded", FlashAttentionScore's default pre_tokens and next_tokens.
UNBOUNDED = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class MaskPlan:
    """How the fused node masks: ``constant`` (true where masked) or ``value`` (``negate``: the
    value is true where allowed), expanded to ``[B, heads, S1, S2]`` when ``heads`` is set."""

    sparse_mode: int = 0
    constant: np.ndarray | None = None
    value: ir.Value | None = None
    negate: bool = False
    heads: int | None = None
    pre_tokens: int = UNBOUNDED
    next_tokens: int = UNBOUNDED

    def attributes(self) -> dict:
        found = {"sparse_mode": self.sparse_mode}
        if self.pre_tokens != UNBOUNDED:
            found["pre_tokens"] = self.pre_tokens
        if self.next_tokens != UNBOUNDED:
            found["next_tokens"] = self.next_tokens
        return found

    def atten_mask(self, op, query: ir.Value, key: ir.Value, seq_axis: int) -> ir.Value | None:
        """The op's atten_mask input, made in the rewrite; the expansion reads B and S1 off
        ``query`` (axes 0 and ``seq_axis``) and S2 off ``key``."""
        if self.constant is not None:
            return op.Constant(value=ir.tensor(self.constant))
        if self.value is None:
            return None
        mask = op.Not(self.value) if self.negate else self.value
        if self.heads is None:
            return mask
        shape = op.Concat(
            op.Shape(query, start=0, end=1),
            op.Constant(value_ints=[self.heads]),
            op.Shape(query, start=seq_axis, end=seq_axis + 1),
            op.Shape(key, start=seq_axis, end=seq_axis + 1),
            axis=0,
        )
        return op.Expand(mask, shape)


def _causal(rows: int, keys: int, bottom_right: bool) -> np.ndarray:
    offset = keys - rows if bottom_right else 0
    return np.arange(keys)[None, :] <= np.arange(rows)[:, None] + offset


def _band(allowed: np.ndarray) -> tuple[int, int]:
    """The tightest pre_tokens and next_tokens around the allowed keys of a [S1, S2] mask."""
    rows, keys = np.nonzero(allowed)
    if rows.size == 0:
        return UNBOUNDED, UNBOUNDED
    pre, after = int((rows - keys).max()), int((keys - rows).max())
    s1, s2 = allowed.shape
    return (pre if pre < s1 - 1 else UNBOUNDED), (after if after < s2 - 1 else UNBOUNDED)


def plan_constant(allowed: np.ndarray, scores: list, rows_zero: bool, causal: bool = False) -> MaskPlan | str:
    """The plan of a constant mask (true where allowed), broadcast to the scores' ``[B, N1, S1,
    S2]``; ``rows_zero``: the original gives 0 where a row keeps no key; ``causal``: the keys
    after the row (top left) masked too. A reason when none fits."""
    batch, heads, s1, s2 = scores
    if allowed.ndim > 4:
        return "the mask has more axes than the scores"
    full = allowed.reshape((1,) * (4 - allowed.ndim) + allowed.shape)
    if not (isinstance(s1, int) and isinstance(s2, int)):
        s1, s2 = full.shape[2:]
    try:
        full = np.broadcast_to(full, (*full.shape[:2], s1, s2))
    except ValueError:
        return "the mask does not broadcast to the scores"
    if causal:
        full = full & _causal(s1, s2, bottom_right=False)
    if s2 and not rows_zero and not full.any(-1).all():
        return "a query row keeps no key, which the original does not give 0 (the op does)"
    if full.all():
        return MaskPlan()
    uniform = (full == full[:1, :1]).all()
    if uniform:
        square = full[0, 0]
        for mode, bottom_right in ((3, True), (2, False)):
            if np.array_equal(square, _causal(s1, s2, bottom_right)):
                return MaskPlan(sparse_mode=mode)
        pre, after = _band(square)
        return MaskPlan(constant=~square, pre_tokens=pre, next_tokens=after)
    b, h = full.shape[:2]
    if b > 1 and not same_dim(batch, b):
        return "the mask's batch is not the scores'"
    if h == 1:
        return MaskPlan(constant=~full)
    if b == 1 and batch != 1:
        if not isinstance(batch, int):
            return "a mask per head shared by a batch of unknown size"
        full = np.broadcast_to(full, (batch, *full.shape[1:]))
    return MaskPlan(constant=~full)


def plan_value(value: ir.Value | None, negate: bool, scores: list) -> MaskPlan | str:
    """The plan of a boolean mask computed at run time (true where masked, or allowed with
    ``negate``): as it is where its shape is one the op takes, else expanded to it. The caller has
    found it broadcasting to the scores ``[B, N1, S1, S2]``."""
    shape = dims(value)
    if shape is None or len(shape) > 4:
        return "the mask's rank is unknown or above 4"
    batch, heads, s1, s2 = scores
    if len(shape) == 2 and same_dim(shape[0], s1) and same_dim(shape[1], s2):
        return MaskPlan(value=value, negate=negate)
    tail_fits = len(shape) == 4 and same_dim(shape[2], s1) and same_dim(shape[3], s2)
    if tail_fits and same_dim(shape[0], batch) and shape[1] in (1, heads):
        return MaskPlan(value=value, negate=negate)
    per_head = len(shape) >= 3 and shape[-3] != 1
    return MaskPlan(value=value, negate=negate, heads=heads if per_head else 1)


@dataclasses.dataclass(frozen=True)
class Addend:
    """An additive mask read off the graph: a constant's allowed keys, or a run-time boolean
    (``negate``: true where allowed), or the top-left causal mask of a dynamic export;
    ``infinite``: its masked keys are -inf (a standard Attention gives 0 where a row has none)."""

    constant: np.ndarray | None = None
    value: ir.Value | None = None
    negate: bool = False
    causal: bool = False
    infinite: bool = False


def _uncast(value: ir.Value) -> ir.Value:
    while (node := produced_by(value, "Cast", "CastLike")) is not None and node.inputs[0] is not None:
        value = node.inputs[0]
    return value


def read_addend(value: ir.Value, scores: list) -> Addend | str:
    """The mask that ``value``, added to the scores, applies; a reason when it is not a mask
    (a bias of other values, an ALiBi slope, a learned tensor)."""
    value = _uncast(value)
    if value.const_value is not None:
        array = value.const_value.numpy()
        if array.dtype.kind != "f":
            return "the addend is not floating-point"
        allowed, masked = array == 0, array <= EXCLUDED
        if not (allowed | masked).all():
            return "the addend is a bias, not a mask of 0 and a value no score climbs over"
        return Addend(constant=allowed, infinite=bool(np.isneginf(array[masked]).all()))
    node = produced_by(value, "Where")
    if node is None:
        return "the addend is neither a constant nor a Where of a boolean"
    condition, if_true, if_false = node.inputs
    high, low = scalar(if_true), scalar(if_false)
    if high == 0 and isinstance(low, float) and low <= EXCLUDED:
        negate, fill = True, low
    elif low == 0 and isinstance(high, float) and high <= EXCLUDED:
        negate, fill = False, high
    else:
        return "the addend is a Where of values other than 0 and a mask's fill"
    infinite = fill == float("-inf")
    if condition is not None and condition.const_value is not None:  # a static export's, folded
        allowed = condition.const_value.numpy().astype(bool)
        return Addend(constant=allowed if negate else ~allowed, infinite=infinite)
    if not negate and _is_lower_triangle(condition, scores):
        return Addend(causal=True, infinite=infinite)
    return Addend(value=condition, negate=negate, infinite=infinite)


def _is_lower_triangle(masked: ir.Value | None, scores: list) -> bool:
    """Whether ``masked`` is ``Equal(Trilu(ones [S1, S2], upper=0), 0)``: the exporter's
    ``is_causal`` mask (top left), its ones a constant (left unfolded: a float initializer is kept
    as a weight might be) or expanded at run time."""
    node = produced_by(masked, "Equal")
    if node is None or scalar(node.inputs[1]) != 0:
        return False
    trilu = produced_by(node.inputs[0], "Trilu")
    if trilu is None or trilu.attributes.get_int("upper", 1) != 0:
        return False
    if len(trilu.inputs) > 1 and trilu.inputs[1] is not None and scalar(trilu.inputs[1]) != 0:
        return False
    if not _all_ones(trilu.inputs[0]):
        return False
    shape = dims(trilu.outputs[0])
    return shape is not None and len(shape) == 2 and all(map(same_dim, shape, scores[2:]))


def _all_ones(value: ir.Value | None) -> bool:
    """A constant of ones, or ones expanded from one."""
    if value is not None and value.const_value is not None:
        return bool((value.const_value.numpy() == 1).all())
    ones = produced_by(value, "Expand")
    return ones is not None and scalar(ones.inputs[0]) == 1
