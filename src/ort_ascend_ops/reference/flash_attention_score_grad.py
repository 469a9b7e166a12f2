"""Reference FlashAttentionScoreGrad, written in onnxscript: one function for any node, and one per
presence of the optional inputs (``VARIANTS``). As the forward's: rows of tokens and one batch per
Loop iteration, which recomputes that batch's probabilities from the statistics."""

from onnxscript import script

from ..opschema import default
from ._opset import ascend, op
from .checks import ReadPresent
from .flash_attention_score import AttentionAnyRank
from .flash_attention_score_layout import (
    AttentionBatch,
    AttentionBatchRows,
    AttentionFromRows,
    AttentionRows,
    AttentionStatRows,
)
from .flash_attention_score_mask import AttentionAllowed
from .flash_attention_score_rules import (
    AttentionGradRules,
    AttentionInputs,
    AttentionMask,
    AttentionNoMask,
    AttentionRules,
    AttentionSeqEnds,
    AttentionShapeEnds,
)

_NEG_INF = float("-inf")
_LAYOUT = default("FlashAttentionScoreGrad", "input_layout", str)
_SCALE = default("FlashAttentionScoreGrad", "scale_value", float)
_SPARSE_MODE = default("FlashAttentionScoreGrad", "sparse_mode", int)
_PRE_TOKENS = default("FlashAttentionScoreGrad", "pre_tokens", int)
_NEXT_TOKENS = default("FlashAttentionScoreGrad", "next_tokens", int)
_KEEP_PROB = default("FlashAttentionScoreGrad", "keep_prob", float)


@script(opset=ascend, default_opset=op)
def AttentionBackwardLoop(
    q_rows,
    k_rows,
    ks_rows,
    v_rows,
    dy_rows,
    max_rows,
    sum_rows,
    drow_rows,
    mask4,
    banded,
    ends_q,
    ends_k,
    dims,
    sparse_mode: int,
    pre_tokens: int,
    next_tokens: int,
):
    """Rows of dq [T1, N1, D], dk [T2, N2, D] and dv [T2, N2, Dv] from float32 rows of the scaled
    query, the key, the scaled key, the value, dy, the statistics and Drow = rowsum(dy *
    attention_in) ([T1, N1, 1] each), one batch per iteration."""
    zero_1d = op.Constant(value_ints=[0])
    one_1d = op.Constant(value_ints=[1])
    zero_f = op.Constant(value_float=0.0)
    _, _, _, n1, n2, d, dv = op.Split(dims, num_outputs=7)
    group = n1 / n2
    bounds_q = op.Concat(zero_1d, ends_q, axis=0)
    bounds_k = op.Concat(zero_1d, ends_k, axis=0)
    dq_rows = op.ConstantOfShape(op.Concat(zero_1d, n1, d, axis=0))
    dk_rows = op.ConstantOfShape(op.Concat(zero_1d, n2, d, axis=0))
    dv_rows = op.ConstantOfShape(op.Concat(zero_1d, n2, dv, axis=0))
    batches = op.Size(ends_q)
    batch = op.Constant(value_int=0)
    # A while loop: onnx.reference runs no iteration of a Loop without a condition input.
    more = op.Less(batch, batches)
    while more:
        at = op.Reshape(batch, one_1d)
        q_start = op.Slice(bounds_q, at, at + one_1d)
        q_end = op.Slice(bounds_q, at + one_1d, at + op.Constant(value_ints=[2]))
        k_start = op.Slice(bounds_k, at, at + one_1d)
        k_end = op.Slice(bounds_k, at + one_1d, at + op.Constant(value_ints=[2]))
        q = AttentionBatch(q_rows, q_start, q_end, n2, group)  # [N2, G, S1_b, D]
        dy = AttentionBatch(dy_rows, q_start, q_end, n2, group)  # [N2, G, S1_b, Dv]
        row_max = AttentionBatch(max_rows, q_start, q_end, n2, group)  # [N2, G, S1_b, 1]
        row_sum = AttentionBatch(sum_rows, q_start, q_end, n2, group)
        drow = AttentionBatch(drow_rows, q_start, q_end, n2, group)
        k = AttentionBatch(k_rows, k_start, k_end, n2, one_1d)  # [N2, 1, S2_b, D]
        ks = AttentionBatch(ks_rows, k_start, k_end, n2, one_1d)
        v = AttentionBatch(v_rows, k_start, k_end, n2, one_1d)  # [N2, 1, S2_b, Dv]
        allowed = AttentionAllowed(
            mask4,
            batch,
            op.Squeeze(q_end - q_start),
            op.Squeeze(k_end - k_start),
            n2,
            group,
            banded,
            sparse_mode=sparse_mode,
            pre_tokens=pre_tokens,
            next_tokens=next_tokens,
        )
        scores = op.Where(
            allowed, op.MatMul(q, op.Transpose(k, perm=[0, 1, 3, 2])), op.Constant(value_float=_NEG_INF)
        )
        # P from the statistics; a row whose sum is 0 (no allowed key) is 0, never NaN.
        kept = op.Greater(row_sum, zero_f)
        weights = op.Exp(scores - op.Where(kept, row_max, zero_f))
        p = op.Where(kept, weights / op.Where(kept, row_sum, op.Constant(value_float=1.0)), zero_f)
        ds = p * (op.MatMul(dy, op.Transpose(v, perm=[0, 1, 3, 2])) - drow)
        dq = op.MatMul(ds, ks)
        # Summed over each key head's query group.
        dk = op.ReduceSum(op.MatMul(op.Transpose(ds, perm=[0, 1, 3, 2]), q), one_1d, keepdims=1)
        dv_b = op.ReduceSum(op.MatMul(op.Transpose(p, perm=[0, 1, 3, 2]), dy), one_1d, keepdims=1)
        dq_rows = op.Concat(dq_rows, AttentionBatchRows(dq), axis=0)
        dk_rows = op.Concat(dk_rows, AttentionBatchRows(dk), axis=0)
        dv_rows = op.Concat(dv_rows, AttentionBatchRows(dv_b), axis=0)
        batch = batch + op.Constant(value_int=1)
        more = op.Less(batch, batches)
    return dq_rows, dk_rows, dv_rows


@script(opset=ascend, default_opset=op)
def AttentionBackward(
    query,
    key,
    value,
    dy,
    softmax_max,
    softmax_sum,
    attention_in,
    mask4,
    banded,
    ends_q,
    ends_k,
    dims,
    index,
    scale_value: float,
    sparse_mode: int,
    pre_tokens: int,
    next_tokens: int,
):
    """(dq, dk, dv) from inputs of checked dims, the checked mask and the batch ends, once the
    grad's own inputs are checked; computes in float32, the gradients cast back to T."""
    dims = AttentionGradRules(dims, index, query, dy, softmax_max, softmax_sum, attention_in)
    b, s1, s2, n1, n2, d, dv = op.Split(dims, num_outputs=7)
    scale = op.Constant(value_float=scale_value)
    k_rows = AttentionRows(key, b, s2, n2, d, index)
    dy_rows = AttentionRows(dy, b, s1, n1, dv, index)
    drow = op.ReduceSum(
        dy_rows * AttentionRows(attention_in, b, s1, n1, dv, index), op.Constant(value_ints=[-1]), keepdims=1
    )
    dq_rows, dk_rows, dv_rows = AttentionBackwardLoop(
        AttentionRows(query, b, s1, n1, d, index) * scale,
        k_rows,
        k_rows * scale,
        AttentionRows(value, b, s2, n2, dv, index),
        dy_rows,
        AttentionStatRows(softmax_max, b, s1, n1, index),
        AttentionStatRows(softmax_sum, b, s1, n1, index),
        drow,
        mask4,
        banded,
        ends_q,
        ends_k,
        dims,
        sparse_mode=sparse_mode,
        pre_tokens=pre_tokens,
        next_tokens=next_tokens,
    )
    return (
        op.CastLike(AttentionFromRows(dq_rows, b, s1, n1, d, index), query),
        op.CastLike(AttentionFromRows(dk_rows, b, s2, n2, d, index), query),
        op.CastLike(AttentionFromRows(dv_rows, b, s2, n2, dv, index), query),
    )


@script(opset=ascend, default_opset=op)
def FlashAttentionScoreGrad(
    query,
    key,
    value,
    dy,
    head_num: int,
    atten_mask=None,
    softmax_max=None,
    softmax_sum=None,
    attention_in=None,
    actual_seq_lengths_query=None,
    actual_seq_lengths_kv=None,
    input_layout: str = _LAYOUT,
    scale_value: float = _SCALE,
    sparse_mode: int = _SPARSE_MODE,
    pre_tokens: int = _PRE_TOKENS,
    next_tokens: int = _NEXT_TOKENS,
    keep_prob: float = _KEEP_PROB,
):
    """Gradient of FlashAttentionScore w.r.t. query, key and value; computes in float32, outputs
    cast back to T. The optional inputs are tested for at run time, and read as bool (the mask)
    and int64 (the lengths) only: the variants below serve the other nodes."""
    dims, index = AttentionRules(
        query,
        key,
        value,
        head_num=head_num,
        input_layout=input_layout,
        sparse_mode=sparse_mode,
        keep_prob=keep_prob,
    )
    has_mask = op.OptionalHasElement(atten_mask)
    has_lengths_q = op.OptionalHasElement(actual_seq_lengths_query)
    dims = AttentionInputs(
        dims,
        index,
        has_mask,
        has_lengths_q,
        op.OptionalHasElement(actual_seq_lengths_kv),
        sparse_mode=sparse_mode,
    )
    if has_mask:
        mask = ReadPresent(
            AttentionAnyRank(has_mask),
            atten_mask,
            rule="input 'atten_mask' must be bool (uint8: see attach_functions)",
        )
        mask4 = AttentionMask(mask, dims)
    else:
        mask4 = AttentionNoMask()
    if has_lengths_q:
        lengths_q = ReadPresent(
            op.Constant(value_ints=[]),
            actual_seq_lengths_query,
            rule="input 'actual_seq_lengths_query' must be 1-D int64 (int32: see attach_functions)",
        )
        lengths_kv = ReadPresent(
            op.Constant(value_ints=[]),
            actual_seq_lengths_kv,
            rule="input 'actual_seq_lengths_kv' must be 1-D int64 (int32: see attach_functions)",
        )
        ends_q, ends_k = AttentionSeqEnds(dims, lengths_q, lengths_kv)
    else:
        ends_q, ends_k = AttentionShapeEnds(dims)
    dq, dk, dv = AttentionBackward(
        query,
        key,
        value,
        dy,
        softmax_max,
        softmax_sum,
        attention_in,
        mask4,
        has_mask,
        ends_q,
        ends_k,
        dims,
        index,
        scale_value=scale_value,
        sparse_mode=sparse_mode,
        pre_tokens=pre_tokens,
        next_tokens=next_tokens,
    )
    return dq, dk, dv


@script(opset=ascend, default_opset=op)
def FlashAttentionScoreGradPlain(
    query,
    key,
    value,
    dy,
    head_num: int,
    atten_mask=None,
    softmax_max=None,
    softmax_sum=None,
    attention_in=None,
    actual_seq_lengths_query=None,
    actual_seq_lengths_kv=None,
    input_layout: str = _LAYOUT,
    scale_value: float = _SCALE,
    sparse_mode: int = _SPARSE_MODE,
    pre_tokens: int = _PRE_TOKENS,
    next_tokens: int = _NEXT_TOKENS,
    keep_prob: float = _KEEP_PROB,
):
    """FlashAttentionScoreGrad for nodes that pass no optional input (layouts BSND to SBH)."""
    dims, index = AttentionRules(
        query,
        key,
        value,
        head_num=head_num,
        input_layout=input_layout,
        sparse_mode=sparse_mode,
        keep_prob=keep_prob,
    )
    absent = op.Constant(value=False)
    dims = AttentionInputs(dims, index, absent, absent, absent, sparse_mode=sparse_mode)
    ends_q, ends_k = AttentionShapeEnds(dims)
    dq, dk, dv = AttentionBackward(
        query,
        key,
        value,
        dy,
        softmax_max,
        softmax_sum,
        attention_in,
        AttentionNoMask(),
        absent,
        ends_q,
        ends_k,
        dims,
        index,
        scale_value=scale_value,
        sparse_mode=sparse_mode,
        pre_tokens=pre_tokens,
        next_tokens=next_tokens,
    )
    return dq, dk, dv


@script(opset=ascend, default_opset=op)
def FlashAttentionScoreGradMask(
    query,
    key,
    value,
    dy,
    atten_mask,
    softmax_max,
    softmax_sum,
    attention_in,
    head_num: int,
    actual_seq_lengths_query=None,
    actual_seq_lengths_kv=None,
    input_layout: str = _LAYOUT,
    scale_value: float = _SCALE,
    sparse_mode: int = _SPARSE_MODE,
    pre_tokens: int = _PRE_TOKENS,
    next_tokens: int = _NEXT_TOKENS,
    keep_prob: float = _KEEP_PROB,
):
    """FlashAttentionScoreGrad for nodes that pass atten_mask alone (bool or uint8)."""
    dims, index = AttentionRules(
        query,
        key,
        value,
        head_num=head_num,
        input_layout=input_layout,
        sparse_mode=sparse_mode,
        keep_prob=keep_prob,
    )
    present = op.Constant(value=True)
    absent = op.Constant(value=False)
    dims = AttentionInputs(dims, index, present, absent, absent, sparse_mode=sparse_mode)
    ends_q, ends_k = AttentionShapeEnds(dims)
    dq, dk, dv = AttentionBackward(
        query,
        key,
        value,
        dy,
        softmax_max,
        softmax_sum,
        attention_in,
        AttentionMask(atten_mask, dims),
        present,
        ends_q,
        ends_k,
        dims,
        index,
        scale_value=scale_value,
        sparse_mode=sparse_mode,
        pre_tokens=pre_tokens,
        next_tokens=next_tokens,
    )
    return dq, dk, dv


@script(opset=ascend, default_opset=op)
def FlashAttentionScoreGradTnd(
    query,
    key,
    value,
    dy,
    head_num: int,
    atten_mask=None,
    softmax_max=None,
    softmax_sum=None,
    attention_in=None,
    actual_seq_lengths_query=None,
    actual_seq_lengths_kv=None,
    input_layout: str = _LAYOUT,
    scale_value: float = _SCALE,
    sparse_mode: int = _SPARSE_MODE,
    pre_tokens: int = _PRE_TOKENS,
    next_tokens: int = _NEXT_TOKENS,
    keep_prob: float = _KEEP_PROB,
):
    """FlashAttentionScoreGrad for nodes that pass both lengths inputs and no mask (layout TND)."""
    dims, index = AttentionRules(
        query,
        key,
        value,
        head_num=head_num,
        input_layout=input_layout,
        sparse_mode=sparse_mode,
        keep_prob=keep_prob,
    )
    present = op.Constant(value=True)
    absent = op.Constant(value=False)
    dims = AttentionInputs(dims, index, absent, present, present, sparse_mode=sparse_mode)
    ends_q, ends_k = AttentionSeqEnds(dims, actual_seq_lengths_query, actual_seq_lengths_kv)
    dq, dk, dv = AttentionBackward(
        query,
        key,
        value,
        dy,
        softmax_max,
        softmax_sum,
        attention_in,
        AttentionNoMask(),
        absent,
        ends_q,
        ends_k,
        dims,
        index,
        scale_value=scale_value,
        sparse_mode=sparse_mode,
        pre_tokens=pre_tokens,
        next_tokens=next_tokens,
    )
    return dq, dk, dv


# Present optional inputs -> (overload, function). Other sets break a rule of the contract: the
# function above serves them, and refuses them.
VARIANTS = {
    frozenset(): ("plain", FlashAttentionScoreGradPlain),
    frozenset({"atten_mask"}): ("mask", FlashAttentionScoreGradMask),
    frozenset({"actual_seq_lengths_query", "actual_seq_lengths_kv"}): ("tnd", FlashAttentionScoreGradTnd),
}
