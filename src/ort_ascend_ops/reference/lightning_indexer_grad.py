"""Reference LightningIndexerGrad, written in onnxscript: one function for any node, and one per
presence of the actual_seq_lengths inputs (``VARIANTS``)."""

from onnxscript import FLOAT, INT64, script

from ..opschema import default
from ._opset import ascend, op
from .checks import Check, ElemType, IsIndexType, SameType, SameVector
from .lightning_indexer_rules import BatchCounts, BsndInputs, TestedInputs, TndInputs
from .lightning_indexer_tokens import IndexerTokens

_LAYOUT = default("LightningIndexerGrad", "layout", str)
_SPARSE_MODE = default("LightningIndexerGrad", "sparse_mode", int)
_PRE_TOKENS = default("LightningIndexerGrad", "pre_tokens", int)
_NEXT_TOKENS = default("LightningIndexerGrad", "next_tokens", int)
_DETERMINISTIC = default("LightningIndexerGrad", "deterministic", int)


@script(opset=ascend, default_opset=op)
def IndexerGradRows(
    query, key, dy, sparse_indices, weights, q_shape, k_shape, ends_q, ends_k, head_num: int, sparse_mode: int
):
    """d_query, d_key and d_weights from inputs of checked shapes (query, key, weights) and their
    cumulative batch ends, once dy, sparse_indices and head_num are checked; computes in float32."""
    zero = op.Constant(value_int=0)
    one = op.Constant(value_int=1)
    zero_1d = op.Constant(value_ints=[0])
    one_1d = op.Constant(value_ints=[1])
    two_1d = op.Constant(value_ints=[2])
    minus_one_1d = op.Constant(value_ints=[-1])
    zero_f = op.Constant(value_float=0.0)

    heads = op.Gather(q_shape, op.Constant(value_int=-2))
    heads = Check(
        heads, op.Greater(op.Constant(value_int=head_num), zero), rule="attribute 'head_num' must be >= 1"
    )
    heads = Check(
        heads,
        op.Equal(op.Constant(value_int=head_num), heads),
        rule="attribute 'head_num' must equal query's N1",
    )
    _ = SameType(dy, query, rule="input 'dy' must have query's element type")
    dy_shape = op.Shape(dy)
    # dy and sparse_indices: query's leading axes and K.
    per_token = op.Concat(
        op.Slice(q_shape, zero_1d, op.Constant(value_ints=[-2])), op.Shape(dy, start=-1), axis=0
    )
    dy_shape = Check(
        dy_shape,
        SameVector(dy_shape, per_token),
        rule="input 'dy' must have the shape query.shape[:-2] + [K]",
    )
    index_shape = Check(
        op.Shape(sparse_indices),
        IsIndexType(ElemType(sparse_indices)),
        rule="input 'sparse_indices' must be int32 or int64",
    )
    index_shape = Check(
        index_shape, SameVector(index_shape, dy_shape), rule="input 'sparse_indices' must have dy's shape"
    )
    ends_q = BatchCounts(ends_q, ends_k)
    k_1d = op.Slice(index_shape, minus_one_1d, op.Shape(index_shape))  # from here on, all is checked

    # Both layouts as rows of tokens: query [T1, N1, D], key [T2, D], weights [T1, N1],
    # dy and indices [T1, K]. allowzero=1 throughout: a 0 in a target shape is an empty extent.
    t1_1d = op.ReduceProd(op.Slice(q_shape, zero_1d, op.Constant(value_ints=[-2])), keepdims=1)
    t2_1d = op.ReduceProd(op.Slice(k_shape, zero_1d, minus_one_1d), keepdims=1)
    d_1d = op.Slice(q_shape, minus_one_1d, op.Shape(q_shape))
    rows_k = op.Concat(t1_1d, k_1d, axis=0)
    q_rows = op.Reshape(
        op.Cast(query, to=FLOAT.dtype), op.Concat(t1_1d, op.Reshape(heads, one_1d), d_1d, axis=0), allowzero=1
    )
    w_rows = op.Reshape(
        op.Cast(weights, to=FLOAT.dtype), op.Concat(t1_1d, op.Reshape(heads, one_1d), axis=0), allowzero=1
    )
    dy_rows = op.Reshape(op.Cast(dy, to=FLOAT.dtype), rows_k, allowzero=1)
    idx = op.Reshape(op.Cast(sparse_indices, to=INT64.dtype), rows_k, allowzero=1)
    # Key row T2 is zeros: the slots that select nothing read it, so they score 0 and add nothing.
    key_rows = op.Reshape(op.Cast(key, to=FLOAT.dtype), op.Concat(t2_1d, d_1d, axis=0), allowzero=1)
    key_pad = op.Concat(key_rows, op.ConstantOfShape(op.Concat(one_1d, d_1d, axis=0)), axis=0)
    # Per token: its position in its batch (t - q_start), the batch's lengths and first key row.
    tokens, q_start, k_start, s1_b, s2_b = IndexerTokens(ends_q, ends_k, t1_1d)
    causal_limit = s2_b - s1_b + (tokens - q_start) + one

    # Slot k is read when k < K_t and its index is not -1, with K_t = K (mode 0) or
    # min(K, S2_b - S1_b + s + 1) (mode 3); since k < K, only the causal limit needs a test.
    k = op.Squeeze(k_1d)
    limit = op.Where(op.Equal(op.Constant(value_int=sparse_mode), op.Constant(value_int=3)), causal_limit, k)
    in_limit = op.Less(op.Unsqueeze(op.Range(zero, k, one), zero_1d), op.Unsqueeze(limit, one_1d))
    valid = op.And(in_limit, op.Not(op.Equal(idx, op.Constant(value_int=-1))))
    outside = op.Or(op.Less(idx, zero), op.GreaterOrEqual(idx, op.Unsqueeze(s2_b, one_1d)))
    bad = op.ReduceSum(op.Cast(op.And(valid, outside), to=INT64.dtype), keepdims=0)
    idx = Check(
        idx,
        op.Equal(bad, zero),
        rule="input 'sparse_indices' must hold -1 or a key row of the token's batch, inside [0, S2_b), "
        "in every slot that counts",
    )
    rows = op.Where(valid, op.Unsqueeze(k_start, one_1d) + idx, op.Squeeze(t2_1d))
    dy_valid = op.Where(valid, dy_rows, zero_f)

    kv = op.Gather(key_pad, rows, axis=0)  # [T1, K, D]
    scores = op.MatMul(q_rows, op.Transpose(kv, perm=[0, 2, 1]))  # [T1, N1, K]
    d_weights = op.Squeeze(op.MatMul(op.Relu(scores), op.Unsqueeze(dy_valid, two_1d)), two_1d)
    g = op.Where(
        op.Greater(scores, zero_f), op.Unsqueeze(w_rows, two_1d) * op.Unsqueeze(dy_valid, one_1d), zero_f
    )
    d_query = op.MatMul(g, kv)
    d_key_rows = op.MatMul(op.Transpose(g, perm=[0, 2, 1]), q_rows)  # [T1, K, D]
    d_key_pad = op.ScatterND(
        op.ConstantOfShape(op.Shape(key_pad)), op.Unsqueeze(rows, two_1d), d_key_rows, reduction="add"
    )
    d_key = op.Slice(d_key_pad, zero_1d, t2_1d)
    return (
        op.CastLike(op.Reshape(d_query, q_shape, allowzero=1), query),
        op.CastLike(op.Reshape(d_key, k_shape, allowzero=1), query),
        op.CastLike(op.Reshape(d_weights, op.Slice(q_shape, zero_1d, minus_one_1d), allowzero=1), query),
    )


@script(opset=ascend, default_opset=op)
def LightningIndexerGrad(
    query,
    key,
    dy,
    sparse_indices,
    weights,
    head_num: int,
    actual_seq_lengths_query=None,
    actual_seq_lengths_key=None,
    layout: str = _LAYOUT,
    sparse_mode: int = _SPARSE_MODE,
    pre_tokens: int = _PRE_TOKENS,
    next_tokens: int = _NEXT_TOKENS,
    deterministic: int = _DETERMINISTIC,
):
    """Gradient of the selected indexer scores w.r.t. query, key and weights; computes in
    float32, outputs cast back to T. The token attributes change nothing. The actual_seq_lengths
    inputs are tested for at run time (TestedInputs): the variants below serve the nodes whose
    types that test does not take."""
    q_shape, k_shape, ends_q, ends_k = TestedInputs(
        query,
        key,
        weights,
        actual_seq_lengths_query,
        actual_seq_lengths_key,
        layout=layout,
        sparse_mode=sparse_mode,
    )
    d_query, d_key, d_weights = IndexerGradRows(
        query,
        key,
        dy,
        sparse_indices,
        weights,
        q_shape,
        k_shape,
        ends_q,
        ends_k,
        head_num=head_num,
        sparse_mode=sparse_mode,
    )
    return d_query, d_key, d_weights


@script(opset=ascend, default_opset=op)
def LightningIndexerGradTnd(
    query,
    key,
    dy,
    sparse_indices,
    weights,
    actual_seq_lengths_query,
    actual_seq_lengths_key,
    head_num: int,
    layout: str = _LAYOUT,
    sparse_mode: int = _SPARSE_MODE,
    pre_tokens: int = _PRE_TOKENS,
    next_tokens: int = _NEXT_TOKENS,
    deterministic: int = _DETERMINISTIC,
):
    """LightningIndexerGrad for nodes that pass both actual_seq_lengths inputs (layout TND)."""
    q_shape, k_shape, ends_q, ends_k = TndInputs(
        query,
        key,
        weights,
        actual_seq_lengths_query,
        actual_seq_lengths_key,
        layout=layout,
        sparse_mode=sparse_mode,
    )
    d_query, d_key, d_weights = IndexerGradRows(
        query,
        key,
        dy,
        sparse_indices,
        weights,
        q_shape,
        k_shape,
        ends_q,
        ends_k,
        head_num=head_num,
        sparse_mode=sparse_mode,
    )
    return d_query, d_key, d_weights


@script(opset=ascend, default_opset=op)
def LightningIndexerGradBsnd(
    query,
    key,
    dy,
    sparse_indices,
    weights,
    head_num: int,
    actual_seq_lengths_query=None,
    actual_seq_lengths_key=None,
    layout: str = _LAYOUT,
    sparse_mode: int = _SPARSE_MODE,
    pre_tokens: int = _PRE_TOKENS,
    next_tokens: int = _NEXT_TOKENS,
    deterministic: int = _DETERMINISTIC,
):
    """LightningIndexerGrad for nodes that pass neither actual_seq_lengths input (layout BSND)."""
    q_shape, k_shape, ends_q, ends_k = BsndInputs(query, key, weights, layout=layout, sparse_mode=sparse_mode)
    d_query, d_key, d_weights = IndexerGradRows(
        query,
        key,
        dy,
        sparse_indices,
        weights,
        q_shape,
        k_shape,
        ends_q,
        ends_k,
        head_num=head_num,
        sparse_mode=sparse_mode,
    )
    return d_query, d_key, d_weights


# Present optional inputs -> (overload, function).
VARIANTS = {
    frozenset({"actual_seq_lengths_query", "actual_seq_lengths_key"}): ("tnd", LightningIndexerGradTnd),
    frozenset(): ("bsnd", LightningIndexerGradBsnd),
}
