"""The rules LightningIndexer and its grad share (checks.py tells how they become ONNX), and the
cumulative batch ends both read from their inputs."""

from onnxscript import INT64, script

from ..opschema import choice_rule, choices
from ._opset import ascend, op
from .checks import All, AnyOf, Check, ElemType, IsFloatT, IsIndexType, ReadPresent, SameType, SameVector

# The family's layouts and sparse modes, as its forward op's schema lists them
# (tests/test_opschema.py holds the grad's to the same).
LAYOUTS = choices("LightningIndexer", "layout")
LAYOUT_RULE = choice_rule("LightningIndexer", "layout")
SPARSE_MODES = choices("LightningIndexer", "sparse_mode")
SPARSE_MODE_RULE = choice_rule("LightningIndexer", "sparse_mode")


@script(opset=ascend, default_opset=op)
def IsLayout(names, layout: str):
    """Whether the string attribute ``layout`` is one of the 1-D strings ``names`` (ONNX compares
    strings only from opset 19 on: a string already among them adds no distinct Unique value)."""
    given = op.Reshape(op.Constant(value_string=layout), op.Constant(value_ints=[1]))
    distinct, _, _, _ = op.Unique(op.Concat(names, given, axis=0))
    return op.Equal(op.Size(distinct), op.Size(names))


@script(opset=ascend, default_opset=op)
def IndexerRules(query, key, weights, layout: str, sparse_mode: int):
    """query's and key's shapes, once the attributes and the types and shapes of query, key and
    weights are checked against the contract."""
    tnd = IsLayout(op.Constant(value_strings=["TND"]), layout=layout)
    known_layout = IsLayout(op.Constant(value_strings=LAYOUTS), layout=layout)
    known_mode = AnyOf(op.Equal(op.Constant(value_ints=SPARSE_MODES), op.Constant(value_int=sparse_mode)))
    _ = SameType(key, query, rule="input 'key' must have query's element type")
    _ = SameType(weights, query, rule="input 'weights' must have query's element type")
    q_shape = op.Shape(query)
    k_shape = op.Shape(key)
    rank = op.Where(tnd, op.Constant(value_ints=[3]), op.Constant(value_ints=[4]))
    ranks = op.And(op.Equal(op.Shape(q_shape), rank), op.Equal(op.Shape(k_shape), rank))
    zero_1d = op.Constant(value_ints=[0])
    one_1d = op.Constant(value_ints=[1])
    minus_two = op.Constant(value_ints=[-2])
    minus_one = op.Constant(value_ints=[-1])
    one_head = op.Equal(op.Slice(k_shape, minus_two, minus_one), op.Constant(value_int=1))
    heads_dim = op.Slice(q_shape, minus_two, op.Shape(q_shape))  # [N1, D]
    same_d = op.Equal(op.Slice(k_shape, minus_one, op.Shape(k_shape)), op.Slice(heads_dim, minus_one, rank))
    same_batch = op.Equal(op.Slice(k_shape, zero_1d, one_1d), op.Slice(q_shape, zero_1d, one_1d))
    # One vector holds both shapes, so that every check guards both (checks.py).
    shapes = op.Concat(q_shape, k_shape, axis=0)
    shapes = Check(shapes, known_layout, rule=LAYOUT_RULE)
    shapes = Check(shapes, known_mode, rule=SPARSE_MODE_RULE)
    shapes = Check(
        shapes, IsFloatT(ElemType(query)), rule="input 'query' must be float32, float16 or bfloat16"
    )
    shapes = Check(
        shapes, All(ranks), rule="inputs 'query' and 'key' must have rank 4 (layout BSND) or 3 (TND)"
    )
    shapes = Check(shapes, All(one_head), rule="input 'key' must have one head (N2 = 1)")
    shapes = Check(shapes, All(same_d), rule="inputs 'query' and 'key' must share the head dim D")
    shapes = Check(
        shapes,
        op.Or(tnd, All(same_batch)),
        rule="inputs 'query' and 'key' must share the batch B (layout BSND)",
    )
    # Without heads or head dims nothing in memory would bound the loops over tokens and keys.
    shapes = Check(
        shapes,
        All(op.Greater(heads_dim, op.Constant(value_int=0))),
        rule="input 'query' must have N1 >= 1 heads of D >= 1",
    )
    shapes = Check(
        shapes,
        SameVector(op.Shape(weights), op.Slice(q_shape, zero_1d, minus_one)),
        rule="input 'weights' must have the shape query.shape[:-1] ([B, S1, N1] or [T1, N1])",
    )
    rank_q = op.Shape(q_shape)
    return op.Slice(shapes, zero_1d, rank_q), op.Slice(shapes, rank_q, rank_q + op.Shape(k_shape))


@script(opset=ascend, default_opset=op)
def SeqEnds(lengths, rows):
    """TND's cumulative batch ends (int64), once ``lengths`` is checked against the contract: B
    values, no leading zero, non-decreasing, ending at ``rows`` (1-D [rows]) of its tensor."""
    shape = Check(
        op.Shape(lengths), IsIndexType(ElemType(lengths)), rule="input '{lengths}' must be int64 or int32"
    )
    one_d = op.Equal(op.Shape(shape), op.Constant(value_ints=[1]))
    shape = Check(shape, All(one_d), rule="input '{lengths}' must be 1-D, one value per batch")
    shape = Check(
        shape,
        All(op.Greater(shape, op.Constant(value_ints=[0]))),
        rule="input '{lengths}' must hold one value per batch, at least one",
    )
    # Reshaped to the checked value count, a 1-vector whatever the input's rank: ONNX Runtime
    # infers shapes before any check runs, and a wrong rank must reach the check, not fail there.
    ends = op.Reshape(op.Cast(lengths, to=INT64.dtype), op.ReduceProd(shape, keepdims=1))
    starts = op.Concat(
        op.Constant(value_ints=[0]),
        op.Slice(ends, op.Constant(value_ints=[0]), op.Constant(value_ints=[-1])),
        axis=0,
    )
    ends = Check(
        ends,
        All(op.GreaterOrEqual(ends, starts)),
        rule="input '{lengths}' must be cumulative ends: non-negative and non-decreasing",
    )
    last = op.Slice(ends, op.Constant(value_ints=[-1]), op.Shape(ends))
    return Check(
        ends,
        All(op.Equal(last, rows)),
        rule="input '{lengths}' must end at its tensor's row count (T1 for the query, T2 for the key)",
    )


@script(opset=ascend, default_opset=op)
def ShapeEnds(q_shape, k_shape):
    """BSND's cumulative batch ends: S1 and S2 per batch. Batches that hold neither tokens nor key
    rows are left out, as the native kernels do: an empty tensor may claim any number of them."""
    zero = op.Constant(value_int=0)
    one = op.Constant(value_int=1)
    s1 = op.Gather(q_shape, one)
    s2 = op.Gather(k_shape, one)
    batches = op.Where(op.Or(op.Greater(s1, zero), op.Greater(s2, zero)), op.Gather(q_shape, zero), zero)
    counts = op.Range(one, batches + one, one)
    return counts * s1, counts * s2


@script(opset=ascend, default_opset=op)
def LayoutInputs(q_shape, has_query_lengths, has_key_lengths, layout: str):
    """q_shape, once the layout is checked against which actual_seq_lengths inputs are present."""
    tnd = IsLayout(op.Constant(value_strings=["TND"]), layout=layout)
    both = op.And(has_query_lengths, has_key_lengths)
    neither = op.Not(op.Or(has_query_lengths, has_key_lengths))
    q_shape = Check(
        q_shape,
        op.Or(op.Not(tnd), both),
        rule="layout TND needs inputs 'actual_seq_lengths_query' and 'actual_seq_lengths_key'",
    )
    return Check(q_shape, op.Or(tnd, neither), rule="layout BSND takes no actual_seq_lengths inputs")


@script(opset=ascend, default_opset=op)
def TndInputs(
    query, key, weights, actual_seq_lengths_query, actual_seq_lengths_key, layout: str, sparse_mode: int
):
    """query's and key's checked shapes and the cumulative batch ends, for the variants of the
    nodes that pass both actual_seq_lengths inputs (layout TND)."""
    q_shape, k_shape = IndexerRules(query, key, weights, layout=layout, sparse_mode=sparse_mode)
    present = op.Constant(value=True)
    q_shape = LayoutInputs(q_shape, present, present, layout=layout)
    zero_1d = op.Constant(value_ints=[0])
    one_1d = op.Constant(value_ints=[1])
    ends_q = SeqEnds(actual_seq_lengths_query, op.Slice(q_shape, zero_1d, one_1d))
    ends_k = SeqEnds(actual_seq_lengths_key, op.Slice(k_shape, zero_1d, one_1d))
    return q_shape, k_shape, ends_q, ends_k


@script(opset=ascend, default_opset=op)
def BsndInputs(query, key, weights, layout: str, sparse_mode: int):
    """query's and key's checked shapes and the cumulative batch ends, for the variants of the
    nodes that pass neither actual_seq_lengths input (layout BSND)."""
    q_shape, k_shape = IndexerRules(query, key, weights, layout=layout, sparse_mode=sparse_mode)
    absent = op.Constant(value=False)
    q_shape = LayoutInputs(q_shape, absent, absent, layout=layout)
    ends_q, ends_k = ShapeEnds(q_shape, k_shape)
    return q_shape, k_shape, ends_q, ends_k


@script(opset=ascend, default_opset=op)
def BatchCounts(ends_q, ends_k):
    """ends_q, once both inputs' ends are checked to give one batch count."""
    return Check(
        ends_q,
        SameVector(op.Shape(ends_q), op.Shape(ends_k)),
        rule="inputs 'actual_seq_lengths_query' and 'actual_seq_lengths_key' must have one value per batch each",
    )


@script(opset=ascend, default_opset=op)
def TestedInputs(
    query, key, weights, actual_seq_lengths_query, actual_seq_lengths_key, layout: str, sparse_mode: int
):
    """query's and key's checked shapes and the cumulative batch ends, for the functions that
    test for the actual_seq_lengths inputs at run time, with OptionalHasElement, and read them
    through ReadPresent, which takes them as int64 only (up to opset 27 in ONNX Runtime 1.32)."""
    q_shape, k_shape = IndexerRules(query, key, weights, layout=layout, sparse_mode=sparse_mode)
    has_q = op.OptionalHasElement(actual_seq_lengths_query)
    has_k = op.OptionalHasElement(actual_seq_lengths_key)
    q_shape = LayoutInputs(q_shape, has_q, has_k, layout=layout)
    if has_q:
        lengths_q = ReadPresent(
            op.Constant(value_ints=[]),
            actual_seq_lengths_query,
            rule="input 'actual_seq_lengths_query' must be 1-D int64 (int32: see attach_functions)",
        )
        lengths_k = ReadPresent(
            op.Constant(value_ints=[]),
            actual_seq_lengths_key,
            rule="input 'actual_seq_lengths_key' must be 1-D int64 (int32: see attach_functions)",
        )
        ends_q = SeqEnds(
            lengths_q, op.Slice(q_shape, op.Constant(value_ints=[0]), op.Constant(value_ints=[1]))
        )
        ends_k = SeqEnds(
            lengths_k, op.Slice(k_shape, op.Constant(value_ints=[0]), op.Constant(value_ints=[1]))
        )
    else:
        ends_q, ends_k = ShapeEnds(q_shape, k_shape)
    return q_shape, k_shape, ends_q, ends_k
