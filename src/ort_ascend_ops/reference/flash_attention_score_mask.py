"""Which keys a batch's query rows may read, by sparse mode, band and mask (both FlashAttentionScore
reference functions)."""

from onnxscript import script

from ._opset import ascend, op

_INT64_MAX = 2**63 - 1


@script(opset=ascend, default_opset=op)
def AttentionAllowed(
    mask4, batch, s1_b, s2_b, heads, group, banded, sparse_mode: int, pre_tokens: int, next_tokens: int
):
    """Bool [., ., S1_b, S2_b], broadcast to [heads, group, S1_b, S2_b]: true where query row q of
    the batch may read key k. mask4 is the checked [Bm, Nm, S1, S2] mask ([1, 1, 1, 1] false for
    none), s1_b and s2_b the batch's lengths (scalars), heads and group N2 and N1 / N2 (1-D), and
    ``banded`` whether pre_tokens and next_tokens band the mask (nodes with one)."""
    zero = op.Constant(value_int=0)
    one = op.Constant(value_int=1)
    # k - q per row and key, compared to the limits without adding them: pre_tokens and next_tokens
    # may be any int64.
    offset = op.Unsqueeze(op.Range(zero, s2_b, one), op.Constant(value_ints=[0])) - op.Unsqueeze(
        op.Range(zero, s1_b, one), op.Constant(value_ints=[1])
    )
    unbounded = op.Constant(value_int=_INT64_MAX)
    mode = op.Constant(value_int=sparse_mode)
    above = op.Where(
        op.Equal(mode, op.Constant(value_int=2)),
        zero,
        op.Where(
            op.Equal(mode, op.Constant(value_int=3)),
            s2_b - s1_b,
            op.Where(banded, op.Constant(value_int=next_tokens), unbounded),
        ),
    )
    below = op.Where(banded, op.Constant(value_int=pre_tokens), unbounded)
    band = op.And(op.LessOrEqual(offset, above), op.LessOrEqual(op.Neg(offset), below))
    # The batch's mask: [S1, S2] and [B, 1, S1, S2] broadcast over heads, [B, N1, S1, S2] split
    # into key heads and groups as the scores are.
    mask_b = op.Gather(mask4, op.Min(batch, op.Gather(op.Shape(mask4), zero) - one), axis=0)
    mask_shape = op.Shape(mask_b)
    per_head = op.Greater(op.Gather(mask_shape, zero), one)
    lead = op.Where(per_head, op.Concat(heads, group, axis=0), op.Constant(value_ints=[1, 1]))
    mask_b = op.Reshape(mask_b, op.Concat(lead, op.Shape(mask_b, start=1), axis=0), allowzero=1)
    return op.And(band, op.Not(mask_b))
