"""Reference LightningIndexer, written in onnxscript: one function for any node, and one per
presence of the actual_seq_lengths inputs (``VARIANTS``)."""

from onnxscript import DOUBLE, FLOAT, INT32, script

from ..opschema import default
from ._opset import ascend, op
from .checks import Check
from .lightning_indexer_rules import BatchCounts, BsndInputs, TestedInputs, TndInputs
from .lightning_indexer_tokens import IndexerTokens

_NEG_INF = float("-inf")
_LAYOUT = default("LightningIndexer", "layout", str)
_SPARSE_MODE = default("LightningIndexer", "sparse_mode", int)
_SPARSE_COUNT = default("LightningIndexer", "sparse_count", int)


@script(opset=ascend, default_opset=op)
def IndexerSelect(query, key, weights, q_shape, k_shape, ends_q, ends_k, sparse_mode: int, sparse_count: int):
    """The selection, from inputs of checked shapes and their cumulative batch ends; computes in
    float32."""
    # Shaped by the checked shapes, so that nothing is computed before every check has passed.
    q_f = op.Reshape(op.Cast(query, to=FLOAT.dtype), q_shape, allowzero=1)
    k_f = op.Reshape(op.Cast(key, to=FLOAT.dtype), k_shape, allowzero=1)
    w_f = op.Reshape(
        op.Cast(weights, to=FLOAT.dtype),
        op.Slice(q_shape, op.Constant(value_ints=[0]), op.Constant(value_ints=[-1])),
        allowzero=1,
    )
    zero = op.Constant(value_int=0)
    one = op.Constant(value_int=1)
    zero_1d = op.Constant(value_ints=[0])
    one_1d = op.Constant(value_ints=[1])
    k = Check(
        op.Constant(value_int=sparse_count),
        op.Greater(op.Constant(value_int=sparse_count), zero),
        rule="attribute 'sparse_count' must be >= 1",
    )
    k_1d = op.Reshape(k, one_1d)
    ends_q = BatchCounts(ends_q, ends_k)

    # As LightningIndexerGrad: rows of tokens, a zero key row T2 for the slots that select nothing,
    # and per token its batch's lengths, position and first key row.
    # From the checked shapes, not the tensors' (checks.py).
    lead = op.Slice(q_shape, zero_1d, op.Constant(value_ints=[-2]))
    heads_dim = op.Slice(q_shape, op.Constant(value_ints=[-2]), op.Shape(q_shape))
    t1_1d = op.ReduceProd(lead, keepdims=1)
    t2_1d = op.ReduceProd(op.Slice(k_shape, zero_1d, op.Constant(value_ints=[-1])), keepdims=1)
    d_1d = op.Slice(heads_dim, one_1d, op.Constant(value_ints=[2]))
    q_rows = op.Reshape(q_f, op.Concat(t1_1d, heads_dim, axis=0), allowzero=1)
    w_rows = op.Reshape(w_f, op.Concat(t1_1d, op.Slice(heads_dim, zero_1d, one_1d), axis=0), allowzero=1)
    key_rows = op.Reshape(k_f, op.Concat(t2_1d, d_1d, axis=0), allowzero=1)
    key_pad = op.Concat(key_rows, op.ConstantOfShape(op.Concat(one_1d, d_1d, axis=0)), axis=0)
    tokens, q_start, k_start, s1_b, s2_b = IndexerTokens(ends_q, ends_k, t1_1d)

    # Token t may see its batch's keys i < allowed_t: all S2_b (mode 0), or i <= S2_b - S1_b + s
    # (mode 3). Each token scores a window of W = max(S2_b, K) key positions, padded past
    # allowed_t with the zero row, so that TopK always has K to pick from.
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

    # The contract's order: descending score, ties to the lower key index (TopK's own rule), NaN
    # after every number, the padding last. TopK ranks NaN first, so it ranks float64 keys: the
    # scores, with -inf and NaN moved below every float32 and the padding below those.
    ranked = op.Cast(scores, to=DOUBLE.dtype)
    lowest = op.Cast(op.Constant(value_float=-3.0e38), to=DOUBLE.dtype)  # below -FLT_MAX: -6e38
    ranked = op.Where(
        op.Equal(scores, op.Constant(value_float=_NEG_INF)),
        lowest * op.Cast(op.Constant(value_float=2.0), to=DOUBLE.dtype),
        ranked,
    )
    ranked = op.Where(
        op.IsNaN(scores), lowest * op.Cast(op.Constant(value_float=4.0), to=DOUBLE.dtype), ranked
    )
    ranked = op.Where(in_window, ranked, op.Cast(op.Constant(value_float=_NEG_INF), to=DOUBLE.dtype))
    _, picked = op.TopK(ranked, k_1d, axis=-1, largest=1, sorted=1)
    values = op.GatherElements(scores, picked, axis=1)  # onnx.reference mishandles axis=-1
    # The first min(K, allowed_t) slots are the allowed keys; the rest become -1 and 0.
    kept = op.Less(op.Unsqueeze(op.Range(zero, k, one), zero_1d), op.Unsqueeze(allowed, one_1d))
    out_shape = op.Concat(lead, k_1d, axis=0)
    indices = op.Cast(op.Where(kept, picked, op.Constant(value_int=-1)), to=INT32.dtype)
    values = op.Where(kept, values, op.Constant(value_float=0.0))
    return op.Reshape(indices, out_shape, allowzero=1), op.CastLike(
        op.Reshape(values, out_shape, allowzero=1), query
    )


@script(opset=ascend, default_opset=op)
def LightningIndexer(
    query,
    key,
    weights,
    actual_seq_lengths_query=None,
    actual_seq_lengths_key=None,
    layout: str = _LAYOUT,
    sparse_mode: int = _SPARSE_MODE,
    sparse_count: int = _SPARSE_COUNT,
):
    """The sparse_count best keys of each query token's batch by indexer score, and their scores;
    computes in float32, sparse_values cast back to T. The actual_seq_lengths inputs are tested
    for at run time (TestedInputs): the variants below serve the nodes whose types that test
    does not take."""
    q_shape, k_shape, ends_q, ends_k = TestedInputs(
        query,
        key,
        weights,
        actual_seq_lengths_query,
        actual_seq_lengths_key,
        layout=layout,
        sparse_mode=sparse_mode,
    )
    sparse_indices, sparse_values = IndexerSelect(
        query,
        key,
        weights,
        q_shape,
        k_shape,
        ends_q,
        ends_k,
        sparse_mode=sparse_mode,
        sparse_count=sparse_count,
    )
    return sparse_indices, sparse_values


@script(opset=ascend, default_opset=op)
def LightningIndexerTnd(
    query,
    key,
    weights,
    actual_seq_lengths_query,
    actual_seq_lengths_key,
    layout: str = _LAYOUT,
    sparse_mode: int = _SPARSE_MODE,
    sparse_count: int = _SPARSE_COUNT,
):
    """LightningIndexer for nodes that pass both actual_seq_lengths inputs (layout TND)."""
    q_shape, k_shape, ends_q, ends_k = TndInputs(
        query,
        key,
        weights,
        actual_seq_lengths_query,
        actual_seq_lengths_key,
        layout=layout,
        sparse_mode=sparse_mode,
    )
    sparse_indices, sparse_values = IndexerSelect(
        query,
        key,
        weights,
        q_shape,
        k_shape,
        ends_q,
        ends_k,
        sparse_mode=sparse_mode,
        sparse_count=sparse_count,
    )
    return sparse_indices, sparse_values


@script(opset=ascend, default_opset=op)
def LightningIndexerBsnd(
    query,
    key,
    weights,
    actual_seq_lengths_query=None,
    actual_seq_lengths_key=None,
    layout: str = _LAYOUT,
    sparse_mode: int = _SPARSE_MODE,
    sparse_count: int = _SPARSE_COUNT,
):
    """LightningIndexer for nodes that pass neither actual_seq_lengths input (layout BSND)."""
    q_shape, k_shape, ends_q, ends_k = BsndInputs(query, key, weights, layout=layout, sparse_mode=sparse_mode)
    sparse_indices, sparse_values = IndexerSelect(
        query,
        key,
        weights,
        q_shape,
        k_shape,
        ends_q,
        ends_k,
        sparse_mode=sparse_mode,
        sparse_count=sparse_count,
    )
    return sparse_indices, sparse_values


# Present optional inputs -> (overload, function).
VARIANTS = {
    frozenset({"actual_seq_lengths_query", "actual_seq_lengths_key"}): ("tnd", LightningIndexerTnd),
    frozenset(): ("bsnd", LightningIndexerBsnd),
}
