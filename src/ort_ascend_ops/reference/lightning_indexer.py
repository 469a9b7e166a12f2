"""Reference LightningIndexer, written in onnxscript."""

from onnxscript import FLOAT, INT32, script

from ._opset import ascend, op
from .indexer_tokens import IndexerTokens

_NEG_INF = float("-inf")


@script(opset=ascend, default_opset=op)
def LightningIndexer(
    query,
    key,
    weights,
    actual_seq_lengths_query=None,
    actual_seq_lengths_key=None,
    layout: str = "BSND",
    sparse_mode: int = 3,
    sparse_count: int = 2048,
):
    """The sparse_count best keys of each query token's batch by indexer score, and their scores;
    computes in float32, sparse_values cast back to T. The layout is read from the inputs: given
    actual_seq_lengths (TND) they define the batches, else (BSND) the shapes do; shape inference
    makes the layout attribute agree."""
    q_f = op.Cast(query, to=FLOAT.dtype)
    k_f = op.Cast(key, to=FLOAT.dtype)
    w_f = op.Cast(weights, to=FLOAT.dtype)
    zero = op.Constant(value_int=0)
    one = op.Constant(value_int=1)
    zero_1d = op.Constant(value_ints=[0])
    one_1d = op.Constant(value_ints=[1])
    k = op.Constant(value_int=sparse_count)
    k_1d = op.Reshape(k, one_1d)

    # As LightningIndexerGrad: rows of tokens, a zero key row T2 for the slots that select nothing,
    # and per token its batch's lengths, position and first key row.
    q_shape = op.Shape(q_f)
    k_shape = op.Shape(k_f)
    t1_1d = op.ReduceProd(op.Shape(q_f, end=-2), keepdims=1)
    t2_1d = op.ReduceProd(op.Shape(k_f, end=-1), keepdims=1)
    d_1d = op.Shape(q_f, start=-1)
    q_rows = op.Reshape(q_f, op.Concat(t1_1d, op.Shape(q_f, start=-2), axis=0), allowzero=1)
    w_rows = op.Reshape(w_f, op.Concat(t1_1d, op.Shape(w_f, start=-1), axis=0), allowzero=1)
    key_rows = op.Reshape(k_f, op.Concat(t2_1d, d_1d, axis=0), allowzero=1)
    key_pad = op.Concat(key_rows, op.ConstantOfShape(op.Concat(one_1d, d_1d, axis=0)), axis=0)
    batches = op.Gather(q_shape, zero)
    if op.OptionalHasElement(actual_seq_lengths_query):
        ends_q = op.Concat(op.Constant(value_ints=[]), actual_seq_lengths_query, axis=0)
    else:
        ends_q = op.Range(one, batches + one, one) * op.Gather(q_shape, one)
    if op.OptionalHasElement(actual_seq_lengths_key):
        ends_k = op.Concat(op.Constant(value_ints=[]), actual_seq_lengths_key, axis=0)
    else:
        ends_k = op.Range(one, batches + one, one) * op.Gather(k_shape, one)
    tokens, q_start, k_start, s1_b, s2_b = IndexerTokens(ends_q, ends_k, t1_1d)

    # Token t may see its batch's keys i < allowed_t: all S2_b (mode 0), or i <= S2_b - S1_b + s
    # (mode 3). Each token scores a window of W = max(S2_b, K) key positions, padded past
    # allowed_t with the zero row and a score of -inf, so that TopK always has K to pick from.
    causal_limit = s2_b - s1_b + (tokens - q_start) + one
    causal = op.Equal(op.Constant(value_int=sparse_mode), op.Constant(value_int=3))
    allowed = op.Where(causal, causal_limit, s2_b)
    width = op.ReduceMax(op.Concat(s2_b, k_1d, axis=0), keepdims=0)
    positions = op.Range(zero, width, one)
    in_window = op.Less(op.Unsqueeze(positions, zero_1d), op.Unsqueeze(allowed, one_1d))
    rows = op.Where(
        in_window, op.Unsqueeze(k_start, one_1d) + op.Unsqueeze(positions, zero_1d), op.Squeeze(t2_1d)
    )
    kv = op.Gather(key_pad, rows, axis=0)  # [T1, W, D]
    dots = op.MatMul(q_rows, op.Transpose(kv, perm=[0, 2, 1]))  # [T1, N1, W]
    scores = op.Squeeze(op.MatMul(op.Unsqueeze(w_rows, one_1d), op.Relu(dots)), one_1d)  # [T1, W]
    scores = op.Where(in_window, scores, op.Constant(value_float=_NEG_INF))

    # ONNX specifies TopK's ties to go to the lower index, here the lower key position (ONNX
    # Runtime and onnx.reference follow it). The -inf padding sorts last, so the first
    # min(K, allowed_t) slots are the allowed keys; the rest become -1 and 0.
    values, picked = op.TopK(scores, k_1d, axis=-1, largest=1, sorted=1)
    kept = op.Less(op.Unsqueeze(op.Range(zero, k, one), zero_1d), op.Unsqueeze(allowed, one_1d))
    out_shape = op.Concat(op.Shape(q_f, end=-2), k_1d, axis=0)
    indices = op.Cast(op.Where(kept, picked, op.Constant(value_int=-1)), to=INT32.dtype)
    values = op.Where(kept, values, op.Constant(value_float=0.0))
    return op.Reshape(indices, out_shape, allowzero=1), op.CastLike(
        op.Reshape(values, out_shape, allowzero=1), query
    )
