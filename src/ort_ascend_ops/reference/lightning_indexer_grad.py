"""Reference LightningIndexerGrad, written in onnxscript."""

from onnxscript import FLOAT, INT64, script

from ._opset import ascend, op
from .indexer_tokens import IndexerTokens


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
    layout: str = "BSND",
    sparse_mode: int = 3,
    pre_tokens: int = 9223372036854775807,
    next_tokens: int = 9223372036854775807,
    deterministic: int = 0,
):
    """Gradient of the selected indexer scores w.r.t. query, key and weights; computes in
    float32, outputs cast back to T. The layout is read from the inputs: given
    actual_seq_lengths (TND) they define the batches, else (BSND) the shapes do; shape inference
    makes the layout attribute agree. head_num and the token attributes change nothing."""
    q_f = op.Cast(query, to=FLOAT.dtype)
    k_f = op.Cast(key, to=FLOAT.dtype)
    w_f = op.Cast(weights, to=FLOAT.dtype)
    dy_f = op.Cast(dy, to=FLOAT.dtype)
    zero = op.Constant(value_int=0)
    one = op.Constant(value_int=1)
    zero_1d = op.Constant(value_ints=[0])
    one_1d = op.Constant(value_ints=[1])
    two_1d = op.Constant(value_ints=[2])
    zero_f = op.Constant(value_float=0.0)

    # Both layouts as rows of tokens: query [T1, N1, D], key [T2, D], weights [T1, N1],
    # dy and indices [T1, K]. allowzero=1 throughout: a 0 in a target shape is an empty extent.
    q_shape = op.Shape(q_f)
    k_shape = op.Shape(k_f)
    t1_1d = op.ReduceProd(op.Shape(q_f, end=-2), keepdims=1)
    t2_1d = op.ReduceProd(op.Shape(k_f, end=-1), keepdims=1)
    d_1d = op.Shape(q_f, start=-1)
    k_1d = op.Shape(dy_f, start=-1)
    q_rows = op.Reshape(q_f, op.Concat(t1_1d, op.Shape(q_f, start=-2), axis=0), allowzero=1)
    w_rows = op.Reshape(w_f, op.Concat(t1_1d, op.Shape(w_f, start=-1), axis=0), allowzero=1)
    dy_rows = op.Reshape(dy_f, op.Concat(t1_1d, k_1d, axis=0), allowzero=1)
    idx = op.Reshape(op.Cast(sparse_indices, to=INT64.dtype), op.Concat(t1_1d, k_1d, axis=0), allowzero=1)
    # Key row T2 is zeros: the slots that select nothing read it, so they score 0 and add nothing.
    key_rows = op.Reshape(k_f, op.Concat(t2_1d, d_1d, axis=0), allowzero=1)
    key_pad = op.Concat(key_rows, op.ConstantOfShape(op.Concat(one_1d, d_1d, axis=0)), axis=0)

    # Cumulative batch ends: given (TND), or S1 (S2) per batch of the BSND shapes. An input that
    # may be absent can only be read through Concat's variadic slot: ONNX Runtime rejects "" in any
    # other, even in a branch never taken, and the int64 beside it fixes the type.
    batches = op.Gather(q_shape, zero)
    if op.OptionalHasElement(actual_seq_lengths_query):
        ends_q = op.Concat(op.Constant(value_ints=[]), actual_seq_lengths_query, axis=0)
    else:
        ends_q = op.Range(one, batches + one, one) * op.Gather(q_shape, one)
    if op.OptionalHasElement(actual_seq_lengths_key):
        ends_k = op.Concat(op.Constant(value_ints=[]), actual_seq_lengths_key, axis=0)
    else:
        ends_k = op.Range(one, batches + one, one) * op.Gather(k_shape, one)
    # Per token: its position in its batch (t - q_start), the batch's lengths and first key row.
    tokens, q_start, k_start, s1_b, s2_b = IndexerTokens(ends_q, ends_k, t1_1d)
    causal_limit = s2_b - s1_b + (tokens - q_start) + one

    # Slot k is read when k < K_t and its index is not -1, with K_t = K (mode 0) or
    # min(K, S2_b - S1_b + s + 1) (mode 3); since k < K, only the causal limit needs a test.
    k = op.Squeeze(k_1d)
    limit = op.Where(op.Equal(op.Constant(value_int=sparse_mode), op.Constant(value_int=3)), causal_limit, k)
    in_limit = op.Less(op.Unsqueeze(op.Range(zero, k, one), zero_1d), op.Unsqueeze(limit, one_1d))
    valid = op.And(in_limit, op.Not(op.Equal(idx, op.Constant(value_int=-1))))
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
        op.CastLike(op.Reshape(d_weights, op.Shape(w_f), allowzero=1), query),
    )
