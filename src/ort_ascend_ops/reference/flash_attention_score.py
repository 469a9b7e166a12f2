"""Reference FlashAttentionScore, written in onnxscript: one function for any node, and one per
presence of the optional inputs (``VARIANTS``). Every layout becomes rows of tokens, and a Loop
runs one batch per iteration, so that no more than one batch's [N1, S1_b, S2_b] scores exist at a
time (ONNX has no loop over tiles that ONNX Runtime runs without storing each iteration's)."""

from onnxscript import BOOL, INT64, script

from ..opschema import default
from ._opset import ascend, op
from .checks import ReadPresent
from .flash_attention_score_layout import (
    AttentionBatch,
    AttentionBatchRows,
    AttentionFromRows,
    AttentionRows,
    AttentionStats,
)
from .flash_attention_score_mask import AttentionAllowed
from .flash_attention_score_rules import (
    AttentionInputs,
    AttentionMask,
    AttentionNoMask,
    AttentionRules,
    AttentionSeqEnds,
    AttentionShapeEnds,
)

_NEG_INF = float("-inf")
_LAYOUT = default("FlashAttentionScore", "input_layout", str)
_SCALE = default("FlashAttentionScore", "scale_value", float)
_SPARSE_MODE = default("FlashAttentionScore", "sparse_mode", int)
_PRE_TOKENS = default("FlashAttentionScore", "pre_tokens", int)
_NEXT_TOKENS = default("FlashAttentionScore", "next_tokens", int)
_KEEP_PROB = default("FlashAttentionScore", "keep_prob", float)


@script(opset=ascend, default_opset=op)
def AttentionForwardLoop(
    q_rows,
    k_rows,
    v_rows,
    mask4,
    banded,
    ends_q,
    ends_k,
    dims,
    sparse_mode: int,
    pre_tokens: int,
    next_tokens: int,
):
    """Rows of attention_out [T1, N1, Dv], of softmax_max and of softmax_sum [T1, N1, 1], from
    float32 rows of the scaled query, the key and the value, one batch per iteration (batch b:
    rows [ends[b - 1], ends[b]))."""
    zero_1d = op.Constant(value_ints=[0])
    one_1d = op.Constant(value_ints=[1])
    _, _, _, n1, n2, _, dv = op.Split(dims, num_outputs=7)
    group = n1 / n2
    bounds_q = op.Concat(zero_1d, ends_q, axis=0)
    bounds_k = op.Concat(zero_1d, ends_k, axis=0)
    out_rows = op.ConstantOfShape(op.Concat(zero_1d, n1, dv, axis=0))
    max_rows = op.ConstantOfShape(op.Concat(zero_1d, n1, one_1d, axis=0))
    sum_rows = max_rows
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
        k = AttentionBatch(k_rows, k_start, k_end, n2, one_1d)  # [N2, 1, S2_b, D]
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
        # Each key head's group of query heads reads it by broadcasting: no copies of K and V.
        scores = op.Where(
            allowed, op.MatMul(q, op.Transpose(k, perm=[0, 1, 3, 2])), op.Constant(value_float=_NEG_INF)
        )
        row_max = op.ReduceMax(scores, op.Constant(value_ints=[-1]), keepdims=1)
        # A row with no allowed key has max -inf: exp(-inf - 0) = 0 everywhere, sum 0, out 0.
        finite_max = op.Where(
            op.Equal(row_max, op.Constant(value_float=_NEG_INF)), op.Constant(value_float=0.0), row_max
        )
        weights = op.Exp(scores - finite_max)
        row_sum = op.ReduceSum(weights, op.Constant(value_ints=[-1]), keepdims=1)
        divisor = op.Where(
            op.Greater(row_sum, op.Constant(value_float=0.0)), row_sum, op.Constant(value_float=1.0)
        )
        out = op.MatMul(weights, v) / divisor
        out_rows = op.Concat(out_rows, AttentionBatchRows(out), axis=0)
        max_rows = op.Concat(max_rows, AttentionBatchRows(row_max), axis=0)
        sum_rows = op.Concat(sum_rows, AttentionBatchRows(row_sum), axis=0)
        batch = batch + op.Constant(value_int=1)
        more = op.Less(batch, batches)
    return out_rows, max_rows, sum_rows


@script(opset=ascend, default_opset=op)
def AttentionForward(
    query,
    key,
    value,
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
    """(attention_out, softmax_max, softmax_sum) from inputs of checked dims, the checked mask
    and the batch ends; computes in float32, attention_out cast back to T."""
    b, s1, s2, n1, n2, d, dv = op.Split(dims, num_outputs=7)
    scale = op.Constant(value_float=scale_value)
    q_rows = AttentionRows(query, b, s1, n1, d, index) * scale
    k_rows = AttentionRows(key, b, s2, n2, d, index)
    v_rows = AttentionRows(value, b, s2, n2, dv, index)
    out_rows, max_rows, sum_rows = AttentionForwardLoop(
        q_rows,
        k_rows,
        v_rows,
        mask4,
        banded,
        ends_q,
        ends_k,
        dims,
        sparse_mode=sparse_mode,
        pre_tokens=pre_tokens,
        next_tokens=next_tokens,
    )
    attention_out = op.CastLike(AttentionFromRows(out_rows, b, s1, n1, dv, index), query)
    return (
        attention_out,
        AttentionStats(max_rows, b, s1, n1, index),
        AttentionStats(sum_rows, b, s1, n1, index),
    )


@script(opset=ascend, default_opset=op)
def AttentionAnyRank(present):
    """An empty bool tensor of rank 4 whose rank ONNX Runtime cannot infer, its shape computed from
    ``present`` (a run-time value): read before a mask of rank 2 or 4 (ReadPresent's Concat), ONNX
    Runtime skips it, being empty and of no lower rank."""
    three = op.Constant(value_ints=[3]) + op.Cast(op.Not(present), to=INT64.dtype)
    shape = op.Concat(op.Constant(value_ints=[0]), op.Expand(op.Constant(value_ints=[1]), three), axis=0)
    return op.Cast(op.ConstantOfShape(shape), to=BOOL.dtype)


@script(opset=ascend, default_opset=op)
def FlashAttentionScore(
    query,
    key,
    value,
    head_num: int,
    atten_mask=None,
    actual_seq_lengths_query=None,
    actual_seq_lengths_kv=None,
    input_layout: str = _LAYOUT,
    scale_value: float = _SCALE,
    sparse_mode: int = _SPARSE_MODE,
    pre_tokens: int = _PRE_TOKENS,
    next_tokens: int = _NEXT_TOKENS,
    keep_prob: float = _KEEP_PROB,
):
    """Attention over each batch's allowed keys, and its row maxima and sums; computes in float32,
    attention_out cast back to T. The optional inputs are tested for at run time, and read as bool
    (the mask) and int64 (the lengths) only: the variants below serve the other nodes."""
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
    attention_out, softmax_max, softmax_sum = AttentionForward(
        query,
        key,
        value,
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
    return attention_out, softmax_max, softmax_sum


@script(opset=ascend, default_opset=op)
def FlashAttentionScorePlain(
    query,
    key,
    value,
    head_num: int,
    atten_mask=None,
    actual_seq_lengths_query=None,
    actual_seq_lengths_kv=None,
    input_layout: str = _LAYOUT,
    scale_value: float = _SCALE,
    sparse_mode: int = _SPARSE_MODE,
    pre_tokens: int = _PRE_TOKENS,
    next_tokens: int = _NEXT_TOKENS,
    keep_prob: float = _KEEP_PROB,
):
    """FlashAttentionScore for nodes that pass no optional input (layouts BSND to SBH)."""
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
    attention_out, softmax_max, softmax_sum = AttentionForward(
        query,
        key,
        value,
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
    return attention_out, softmax_max, softmax_sum


@script(opset=ascend, default_opset=op)
def FlashAttentionScoreMask(
    query,
    key,
    value,
    atten_mask,
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
    """FlashAttentionScore for nodes that pass atten_mask alone (bool or uint8)."""
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
    attention_out, softmax_max, softmax_sum = AttentionForward(
        query,
        key,
        value,
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
    return attention_out, softmax_max, softmax_sum


@script(opset=ascend, default_opset=op)
def FlashAttentionScoreTnd(
    query,
    key,
    value,
    head_num: int,
    atten_mask=None,
    actual_seq_lengths_query=None,
    actual_seq_lengths_kv=None,
    input_layout: str = _LAYOUT,
    scale_value: float = _SCALE,
    sparse_mode: int = _SPARSE_MODE,
    pre_tokens: int = _PRE_TOKENS,
    next_tokens: int = _NEXT_TOKENS,
    keep_prob: float = _KEEP_PROB,
):
    """FlashAttentionScore for nodes that pass both lengths inputs and no mask (layout TND)."""
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
    attention_out, softmax_max, softmax_sum = AttentionForward(
        query,
        key,
        value,
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
    return attention_out, softmax_max, softmax_sum


# Present optional inputs -> (overload, function). Other sets break a rule of the contract: the
# function above serves them, and refuses them.
VARIANTS = {
    frozenset(): ("plain", FlashAttentionScorePlain),
    frozenset({"atten_mask"}): ("mask", FlashAttentionScoreMask),
    frozenset({"actual_seq_lengths_query", "actual_seq_lengths_kv"}): ("tnd", FlashAttentionScoreTnd),
}
