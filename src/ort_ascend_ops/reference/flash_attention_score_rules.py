"""The rules FlashAttentionScore and its grad share (checks.py tells how they become ONNX): the
attributes and query/key/value's geometry, checked into one vector of dims
[B, S1, S2, N1, N2, D, Dv] (TND: B = 1, S1 = T1, S2 = T2), the optional inputs' presence, the mask,
the batch ends, and the grad's extra inputs."""

from onnxscript import BOOL, INT64, script

from ..opschema import choice_rule, choices
from ._opset import ascend, op
from .checks import TYPE_FLOAT32, All, AnyOf, Check, ElemType, IsFloatT, SameType, SameVector
from .flash_attention_score_layout import (
    BSH,
    LAYOUTS,
    SBH,
    TND,
    AttentionLayout,
    AttentionShape,
    AttentionStatsShape,
)
from .lightning_indexer_rules import SeqEnds

LAYOUT_RULE = choice_rule("FlashAttentionScore", "input_layout")
SPARSE_MODES = choices("FlashAttentionScore", "sparse_mode")
SPARSE_MODE_RULE = choice_rule("FlashAttentionScore", "sparse_mode")
(KEEP_PROB,) = choices("FlashAttentionScore", "keep_prob")
KEEP_PROB_RULE = choice_rule("FlashAttentionScore", "keep_prob")

# Where B, S, N and D sit in a shape padded with ones to 5 axes, per layout in LAYOUTS' order.
# Axis 4 is always 1: TND's one batch of the view, and BSH's and SBH's D before H is split.
_AXES = {
    "BSND": [0, 1, 2, 3],
    "BNSD": [0, 2, 1, 3],
    "BSH": [0, 1, 2, 4],
    "SBH": [1, 0, 2, 4],
    "TND": [4, 0, 1, 2],
}
AXES = [axis for name in LAYOUTS for axis in _AXES[name]]

# A mask's element type, told by the values int64 2, 256 and -1 take through it and back.
MASK_PROBES = [2, 256, -1]
AS_BOOL = [1, 1, 1]
AS_UINT8 = [2, 0, 255]


@script(opset=ascend, default_opset=op)
def AttentionAxes(shape, index):
    """[B, S, N, D] of a shape in the layout of LAYOUTS' ``index`` (BSH, SBH: [B, S, H, 1]), any
    rank: a broken rank gives values its check refuses, never an error of its own."""
    padded = op.Slice(
        op.Concat(shape, op.Constant(value_ints=[1, 1, 1, 1, 1]), axis=0),
        op.Constant(value_ints=[0]),
        op.Constant(value_ints=[5]),
    )
    last = op.Constant(value_int=len(LAYOUTS) - 1)
    rows = op.Min(index, last) * op.Constant(value_int=4) + op.Constant(value_ints=[0, 1, 2, 3])
    return op.Gather(padded, op.Gather(op.Constant(value_ints=AXES), rows))


@script(opset=ascend, default_opset=op)
def AttentionRules(query, key, value, head_num: int, input_layout: str, sparse_mode: int, keep_prob: float):
    """The layout's index and the dims, once the attributes and the types and shapes of query, key
    and value are checked against the contract."""
    index = AttentionLayout(layout=input_layout)
    hidden = op.Or(op.Equal(index, op.Constant(value_int=BSH)), op.Equal(index, op.Constant(value_int=SBH)))
    three = op.Or(hidden, op.Equal(index, op.Constant(value_int=TND)))
    rank = op.Where(three, op.Constant(value_ints=[3]), op.Constant(value_ints=[4]))
    _ = SameType(key, query, rule="input 'key' must have query's element type")
    _ = SameType(value, query, rule="input 'value' must have query's element type")
    q_shape = op.Shape(query)
    k_shape = op.Shape(key)
    v_shape = op.Shape(value)
    ranks = op.Concat(op.Shape(q_shape), op.Shape(k_shape), op.Shape(v_shape), axis=0)
    b_q, s_q, n_q, d_q = op.Split(AttentionAxes(q_shape, index), num_outputs=4)
    b_k, s_k, n_k, d_k = op.Split(AttentionAxes(k_shape, index), num_outputs=4)
    b_v, s_v, n_v, d_v = op.Split(AttentionAxes(v_shape, index), num_outputs=4)
    one = op.Constant(value_ints=[1])
    zero = op.Constant(value_ints=[0])
    heads = op.Reshape(op.Constant(value_int=head_num), one)
    # BSH and SBH: N and D from H (n_*), with D = H1 / N1, N2 = H2 / D, Dv = Hv / N2; the checks
    # below hold each division exact. Divisors of at least 1: a broken rule must reach its check.
    n1 = op.Where(hidden, heads, n_q)
    d = op.Where(hidden, n_q / op.Max(heads, one), d_q)
    n2 = op.Where(hidden, n_k / op.Max(d, one), n_k)
    d_k = op.Where(hidden, d, d_k)
    n_v2 = op.Where(hidden, n2, n_v)
    dv = op.Where(hidden, n_v / op.Max(n2, one), d_v)
    dims = op.Concat(b_q, s_q, s_k, n1, n2, d, dv, axis=0)
    dims = Check(dims, op.Less(index, op.Constant(value_int=len(LAYOUTS))), rule=LAYOUT_RULE)
    dims = Check(
        dims,
        AnyOf(op.Equal(op.Constant(value_ints=SPARSE_MODES), op.Constant(value_int=sparse_mode))),
        rule=SPARSE_MODE_RULE,
    )
    dims = Check(
        dims,
        op.Equal(op.Constant(value_float=keep_prob), op.Constant(value_float=KEEP_PROB)),
        rule=KEEP_PROB_RULE,
    )
    dims = Check(dims, IsFloatT(ElemType(query)), rule="input 'query' must be float32, float16 or bfloat16")
    dims = Check(
        dims,
        All(op.Equal(ranks, rank)),
        rule="inputs 'query', 'key' and 'value' must have rank 4 (layouts BSND, BNSD) or 3 (BSH, SBH, TND)",
    )
    dims = Check(dims, All(op.Greater(heads, zero)), rule="attribute 'head_num' must be >= 1")
    dims = Check(
        dims,
        op.Or(hidden, All(op.Equal(n_q, heads))),
        rule="attribute 'head_num' must equal query's heads N1",
    )
    dims = Check(
        dims,
        op.Or(op.Not(hidden), All(op.Equal(op.Mod(n_q, op.Max(heads, one)), zero))),
        rule="input 'query' must have a hidden size H1 = head_num * D (layouts BSH, SBH)",
    )
    # Without heads or head dims nothing in memory would bound the rows such tensors claim.
    dims = Check(dims, All(op.Greater(d, zero)), rule="input 'query' must have a head dim D >= 1")
    dims = Check(
        dims,
        op.Or(op.Not(hidden), All(op.Equal(op.Mod(n_k, op.Max(d, one)), zero))),
        rule="input 'key' must have a hidden size H2 = N2 * D (layouts BSH, SBH)",
    )
    dims = Check(
        dims,
        All(op.And(op.Greater(n2, zero), op.Equal(op.Mod(n1, op.Max(n2, one)), zero))),
        rule="input 'key' must have N2 >= 1 heads that divide head_num (N1 % N2 == 0)",
    )
    dims = Check(dims, All(op.Equal(d_k, d)), rule="input 'key' must have query's head dim D")
    dims = Check(
        dims,
        op.Or(op.Not(hidden), All(op.Equal(op.Mod(n_v, op.Max(n2, one)), zero))),
        rule="input 'value' must have a hidden size Hv = N2 * Dv (layouts BSH, SBH)",
    )
    dims = Check(dims, All(op.Equal(n_v2, n2)), rule="input 'value' must have key's heads N2")
    dims = Check(dims, All(op.Greater(dv, zero)), rule="input 'value' must have a head dim Dv >= 1")
    dims = Check(
        dims,
        All(op.And(op.Equal(b_k, b_q), op.Equal(b_v, b_q))),
        rule="inputs 'query', 'key' and 'value' must share the batch B",
    )
    dims = Check(
        dims, All(op.Equal(s_v, s_k)), rule="inputs 'key' and 'value' must share the key rows S2 (T2 in TND)"
    )
    return dims, index


@script(opset=ascend, default_opset=op)
def AttentionInputs(dims, index, has_mask, has_lengths_q, has_lengths_kv, sparse_mode: int):
    """dims, once the layout and sparse_mode are checked against which optional inputs are
    present."""
    tnd = op.Equal(index, op.Constant(value_int=TND))
    dims = Check(
        dims,
        op.Or(op.Not(tnd), op.And(has_lengths_q, has_lengths_kv)),
        rule="layout TND needs inputs 'actual_seq_lengths_query' and 'actual_seq_lengths_kv'",
    )
    dims = Check(
        dims,
        op.Or(tnd, op.Not(op.Or(has_lengths_q, has_lengths_kv))),
        rule="layouts BSND, BNSD, BSH and SBH take no input 'actual_seq_lengths_query' or 'actual_seq_lengths_kv'",
    )
    return Check(
        dims,
        op.Or(
            op.Not(has_mask),
            op.And(op.Not(tnd), op.Equal(op.Constant(value_int=sparse_mode), op.Constant(value_int=0))),
        ),
        rule="input 'atten_mask' is taken only with sparse_mode 0 and not in layout TND",
    )


@script(opset=ascend, default_opset=op)
def AttentionMask(atten_mask, dims):
    """The mask as bool [Bm, Nm, S1, S2] (Bm 1 or B, Nm 1 or N1), once its type and shape are
    checked."""
    probes = op.Constant(value_ints=MASK_PROBES)
    back = op.Cast(op.CastLike(probes, atten_mask), to=INT64.dtype)
    typed = op.Or(
        SameVector(back, op.Constant(value_ints=AS_BOOL)), SameVector(back, op.Constant(value_ints=AS_UINT8))
    )
    shape = Check(op.Shape(atten_mask), typed, rule="input 'atten_mask' must be bool or uint8")
    b, s1, s2, n1, _, _, _ = op.Split(dims, num_outputs=7)
    one = op.Constant(value_ints=[1])
    fits = op.Concat(
        op.Reshape(SameVector(shape, op.Concat(s1, s2, axis=0)), one),
        op.Reshape(SameVector(shape, op.Concat(b, one, s1, s2, axis=0)), one),
        op.Reshape(SameVector(shape, op.Concat(b, n1, s1, s2, axis=0)), one),
        axis=0,
    )
    shape = Check(
        shape, AnyOf(fits), rule="input 'atten_mask' must be [S1, S2], [B, 1, S1, S2] or [B, N1, S1, S2]"
    )
    shape4 = op.Slice(
        op.Concat(one, one, shape, axis=0), op.Constant(value_ints=[-4]), op.Constant(value_ints=[6])
    )
    return op.Reshape(op.Cast(atten_mask, to=BOOL.dtype), shape4, allowzero=1)


@script(opset=ascend, default_opset=op)
def AttentionNoMask():
    """The mask of the nodes that pass none: nothing masked, [1, 1, 1, 1]."""
    return op.Cast(op.ConstantOfShape(op.Constant(value_ints=[1, 1, 1, 1])), to=BOOL.dtype)


@script(opset=ascend, default_opset=op)
def AttentionShapeEnds(dims):
    """The cumulative batch ends of query and key rows in BSND, BNSD, BSH and SBH: S1 and S2 per
    batch. Batches that hold neither are left out, as the native kernels do: an empty tensor may
    claim any number of them."""
    zero = op.Constant(value_int=0)
    one = op.Constant(value_int=1)
    b = op.Gather(dims, zero)
    s1 = op.Gather(dims, one)
    s2 = op.Gather(dims, op.Constant(value_int=2))
    batches = op.Where(op.Or(op.Greater(s1, zero), op.Greater(s2, zero)), b, zero)
    counts = op.Range(one, batches + one, one)
    return counts * s1, counts * s2


@script(opset=ascend, default_opset=op)
def AttentionSeqEnds(dims, actual_seq_lengths_query, actual_seq_lengths_kv):
    """TND's cumulative batch ends, once both lengths inputs are checked (SeqEnds) to end at T1
    and T2 and to count the same batches."""
    ends_q = SeqEnds(
        actual_seq_lengths_query, op.Slice(dims, op.Constant(value_ints=[1]), op.Constant(value_ints=[2]))
    )
    ends_k = SeqEnds(
        actual_seq_lengths_kv, op.Slice(dims, op.Constant(value_ints=[2]), op.Constant(value_ints=[3]))
    )
    ends_q = Check(
        ends_q,
        SameVector(op.Shape(ends_q), op.Shape(ends_k)),
        rule="inputs 'actual_seq_lengths_query' and 'actual_seq_lengths_kv' must have one value per batch each",
    )
    return ends_q, ends_k


@script(opset=ascend, default_opset=op)
def AttentionGradRules(dims, index, query, dy, softmax_max, softmax_sum, attention_in):
    """dims, once the grad's dy, attention_in and statistics are checked against the forward's
    outputs."""
    b, s1, _, n1, _, _, dv = op.Split(dims, num_outputs=7)
    _ = SameType(dy, query, rule="input 'dy' must have query's element type")
    _ = SameType(attention_in, query, rule="input 'attention_in' must have query's element type")
    out_shape = AttentionShape(b, s1, n1, dv, index)
    stats_shape = AttentionStatsShape(b, s1, n1, index)
    float32 = op.Constant(value_int=TYPE_FLOAT32)
    dims = Check(
        dims,
        SameVector(op.Shape(dy), out_shape),
        rule="input 'dy' must have attention_out's shape (query's, with value's head dim Dv)",
    )
    dims = Check(
        dims,
        SameVector(op.Shape(attention_in), out_shape),
        rule="input 'attention_in' must have attention_out's shape (query's, with value's head dim Dv)",
    )
    dims = Check(dims, op.Equal(ElemType(softmax_max), float32), rule="input 'softmax_max' must be float32")
    dims = Check(dims, op.Equal(ElemType(softmax_sum), float32), rule="input 'softmax_sum' must be float32")
    dims = Check(
        dims,
        SameVector(op.Shape(softmax_max), stats_shape),
        rule="input 'softmax_max' must be [B, N1, S1, 8] ([T1, N1, 8] in TND)",
    )
    return Check(
        dims,
        SameVector(op.Shape(softmax_sum), stats_shape),
        rule="input 'softmax_sum' must be [B, N1, S1, 8] ([T1, N1, 8] in TND)",
    )
