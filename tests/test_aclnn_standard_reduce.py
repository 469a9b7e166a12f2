"""The reduce family of standard ops on the NPU (native/aclnn/standard/reduce.cc) against NumPy's
float64 formulas of ONNX's definitions: axes given, negative, absent or empty (all axes, or none
under noop_with_empty_axes), keepdims both ways, empty reductions, CumSum's exclusive and reverse,
ArgMax and TopK over distinct values (and ties, where ONNX fixes the answer), every type each op
takes, and refusals naming the op and the rule."""

import dataclasses

import numpy as np
import pytest
from aclnn_standard import (
    BOOL,
    F32,
    FLOATS,
    I32,
    I64,
    NUMBERS,
    Case,
    check,
    floats,
    node_model,
    params,
    refused,
    run,
    values,
    wide,
)
from onnx import TensorProto

from ort_ascend_ops import aclnn_emulator
from ort_ascend_ops.cann_ep.aclnn_ops import to_aclnn_domain


def numbers(rng, shape, dtype, low=-4, high=5):
    return values(rng, shape, dtype, low, high)


def distinct(rng, shape, dtype):
    """Values all different (halves of a permutation: exact in every type), so that orders and
    indices are defined."""
    n = int(np.prod(shape))
    values = (rng.permutation(n) - n // 2).reshape(shape)
    return (values * 0.5).astype(dtype) if dtype in FLOATS else values.astype(dtype)


def ints(*values):
    return np.array(values, dtype=np.int64)


def reduce_case(op, function, reducer, shape, axes, dtypes, id, **attrs):
    """A reduction over ``axes`` (None: the input absent), the oracle NumPy's reducer over the same
    axes as ONNX reads them; ``function`` None where no vendor function runs (an identity)."""
    keep = bool(attrs.get("keepdims", 1))
    noop = bool(attrs.get("noop_with_empty_axes", 0))

    def make(rng, t):
        data = numbers(rng, shape, t)
        return [data] if axes is None else [data, ints(*axes)]

    def oracle(x, *_):
        if not axes and noop:
            return wide(x)[0]
        over = tuple(axes) if axes else None
        return np.asarray(reducer(wide(x)[0], axis=over, keepdims=keep))

    constants = () if axes is None else (1,)
    return Case(op, make, oracle, [function] if function else [], attrs, dtypes, constants=constants, id=id)


def l2(x, axis, keepdims):
    """ONNX's ReduceL2: the square root of the sum of squares."""
    return np.sqrt(np.sum(np.square(x), axis=axis, keepdims=keepdims))


REDUCTIONS = [
    reduce_case("ReduceSum", "aclnnReduceSum", np.sum, [2, 3, 4], [1], NUMBERS, "axis-1-kept"),
    reduce_case(
        "ReduceSum", "aclnnReduceSum", np.sum, [2, 3, 4], [-1, 0], NUMBERS, "negative-dropped", keepdims=0
    ),
    reduce_case("ReduceSum", "aclnnReduceSum", np.sum, [3, 5], None, NUMBERS, "absent-axes-all", keepdims=0),
    reduce_case("ReduceSum", "aclnnReduceSum", np.sum, [3, 5], [], NUMBERS, "empty-axes-all"),
    reduce_case("ReduceSum", "aclnnReduceSum", np.sum, [4, 256], [1], FLOATS, "long-rows"),
    reduce_case("ReduceMean", "aclnnMean", np.mean, [2, 3, 4], [0, 2], FLOATS, "two-axes"),
    reduce_case("ReduceMean", "aclnnMean", np.mean, [3, 5], None, FLOATS, "all", keepdims=0),
    reduce_case("ReduceMean", "aclnnMean", np.mean, [2, 3], [-1], FLOATS, "negative", keepdims=0),
    reduce_case("ReduceL2", "aclnnNorm", l2, [2, 3, 4], [1], FLOATS, "axis-1"),
    reduce_case("ReduceL2", "aclnnNorm", l2, [3, 5], None, FLOATS, "all", keepdims=0),
    reduce_case("ReduceMax", "aclnnAmax", np.max, [2, 3, 4], [1], (*NUMBERS, BOOL), "axis-1"),
    reduce_case(
        "ReduceMax", "aclnnAmax", np.max, [2, 3, 4], [-1, 0], NUMBERS, "negative-dropped", keepdims=0
    ),
    reduce_case("ReduceMax", "aclnnAmax", np.max, [3, 5], None, NUMBERS, "all"),
    reduce_case("ReduceMin", "aclnnAmin", np.min, [2, 3, 4], [2], (*NUMBERS, BOOL), "axis-2"),
    reduce_case("ReduceMin", "aclnnAmin", np.min, [3, 5], [], NUMBERS, "empty-axes-all", keepdims=0),
]


def factors(rng, shape, dtype):
    """Values whose products stay well within every type: small integers, floats near 1 of either sign."""
    if dtype in FLOATS:
        sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        return (sign * rng.uniform(0.5, 1.5, shape)).astype(dtype)
    return values(rng, shape, dtype, -3, 4)


def prod_case(shape, axes, id, **attrs):
    case = reduce_case("ReduceProd", "aclnnProdDim", np.prod, shape, axes, NUMBERS, id, **attrs)

    def make(rng, t):
        data = factors(rng, shape, t)
        return [data] if axes is None else [data, ints(*axes)]

    return dataclasses.replace(case, make=make)


PRODS = [
    prod_case([2, 3, 4], [1], "axis-1-kept"),
    prod_case([2, 3, 4], [-1, 0], "two-axes-dropped", keepdims=0),
    prod_case([5], None, "absent-axes-all"),  # the gradient graphs' numel of a shape
    prod_case([3, 4], [], "empty-axes-all", keepdims=0),
]

# noop_with_empty_axes with no axes is ONNX's identity: a copy, no vendor call.
IDENTITIES = [
    reduce_case(
        op,
        None,
        None,
        [2, 3],
        axes,
        NUMBERS,
        f"noop-{'absent' if axes is None else 'empty'}",
        noop_with_empty_axes=1,
    )
    for op in ("ReduceSum", "ReduceMax", "ReduceProd")
    for axes in (None, [])
]

EMPTY = [
    # A sum over no values is 0 and a mean NaN (the vendor's fills); the rows reduce nothing.
    Case(
        "ReduceSum",
        lambda rng, t: [np.zeros([2, 0, 3], t), ints(1)],
        lambda x, a: np.zeros([2, 1, 3]),
        ["aclnnReduceSum"],
        dtypes=NUMBERS,
        constants=(1,),
        id="empty-axis",
    ),
    Case(
        "ReduceMean",
        lambda rng, t: [np.zeros([0, 3], t), ints(0)],
        lambda x, a: np.full([1, 3], np.nan),
        ["aclnnMean"],
        constants=(1,),
        id="empty-axis",
    ),
    Case(
        "ReduceMax",
        lambda rng, t: [np.zeros([0, 3], t), ints(1)],
        lambda x, a: np.zeros([0, 1]),
        [],
        dtypes=(F32,),
        constants=(1,),
        id="nothing-to-reduce",
    ),
    Case(
        "ReduceProd",
        lambda rng, t: [np.zeros([2, 0, 3], t), ints(1)],
        lambda x, a: np.ones([2, 1, 3]),
        ["aclnnProdDim"],
        dtypes=NUMBERS,
        constants=(1,),
        id="empty-axis-is-1",
    ),
]


def cumsum_oracle(exclusive, reverse, axis):
    axis = int(np.asarray(axis).reshape(-1)[0])

    def oracle(x, _axis):
        v = wide(x)[0]
        if reverse:
            v = np.flip(v, axis)
        s = np.cumsum(v, axis=axis)
        if exclusive:
            s = s - v
        return np.flip(s, axis) if reverse else s

    return oracle


def cumsum_case(axis, exclusive=0, reverse=0, axis_type=I64, shape=(3, 4, 2), id=None):
    function = "aclnnCumsumV2" if exclusive or reverse else "aclnnCumsum"
    return Case(
        "CumSum",
        lambda rng, t: [numbers(rng, list(shape), t), np.array(axis, dtype=axis_type)],
        cumsum_oracle(exclusive, reverse, axis),
        [function],
        {"exclusive": exclusive, "reverse": reverse},
        NUMBERS,
        constants=(1,),
        id=id or f"axis{axis}-{axis_type.name}-excl{exclusive}-rev{reverse}",
    )


CUMSUMS = [
    cumsum_case(1),
    cumsum_case(-1, axis_type=I32),
    cumsum_case(0, exclusive=1),
    cumsum_case(2, reverse=1),
    cumsum_case(-2, exclusive=1, reverse=1),
    cumsum_case([1], id="axis-as-1d-tensor"),  # ONNX takes a 0-D or a 1-element 1-D axis
]


def argmax_case(axis=None, keepdims=None, shape=(3, 4, 5), make=distinct, id=""):
    attrs = {k: v for k, v in (("axis", axis), ("keepdims", keepdims)) if v is not None}
    at = 0 if axis is None else axis
    keep = keepdims is None or bool(keepdims)

    def oracle(x):
        index = np.argmax(wide(x)[0], axis=at)  # the first index of the maximum: select_last_index=0
        return np.expand_dims(index, at) if keep else index

    return Case(
        "ArgMax",
        lambda rng, t: [make(rng, list(shape), t)],
        oracle,
        ["aclnnArgMax"],
        attrs,
        NUMBERS,
        id=id,
    )


def few_values(rng, shape, t):
    return numbers(rng, shape, t, 0, 2) if t not in FLOATS else rng.integers(0, 2, shape).astype(t)


ARGMAXES = [
    argmax_case(id="defaults"),
    argmax_case(axis=1, keepdims=1, id="axis-1-kept"),
    argmax_case(axis=-1, keepdims=0, id="last-axis-dropped"),
    argmax_case(axis=0, keepdims=0, make=few_values, id="ties-first-index"),
]


def topk_oracle(k, axis, largest):
    def oracle(x, _k):
        v = wide(x)[0]
        order = np.argsort(-v if largest else v, axis=axis, kind="stable")
        index = np.take(order, np.arange(k), axis=axis)
        return np.take_along_axis(v, index, axis=axis), index

    return oracle


def topk_case(k, axis=None, largest=None, shape=(3, 6, 4), id=""):
    attrs = {k_: v for k_, v in (("axis", axis), ("largest", largest)) if v is not None}
    at = -1 if axis is None else axis
    return Case(
        "TopK",
        lambda rng, t: [distinct(rng, list(shape), t), ints(k)],
        topk_oracle(k, at, largest is None or bool(largest)),
        ["aclnnTopk"],
        attrs,
        NUMBERS,
        constants=(1,),
        outputs=2,
        id=id,
    )


TOPKS = [
    topk_case(2, id="defaults"),
    topk_case(3, axis=1, id="axis-1-largest"),
    topk_case(4, axis=-2, largest=0, id="smallest"),
    topk_case(6, axis=1, largest=0, id="whole-axis-sorted"),
    Case(
        "TopK",
        lambda rng, t: [distinct(rng, [3, 4], t), ints(3)],
        lambda x, k: topk_oracle(3, -1, True)(x, k),
        ["aclnnTopk"],
        {"sorted": 0},  # any order is ONNX's; the NPU's is the sorted one
        NUMBERS,
        constants=(1,),
        outputs=2,
        id="unsorted-attribute",
    ),
]


@pytest.mark.parametrize("case, dtype", params([*REDUCTIONS, *PRODS, *EMPTY, *CUMSUMS, *ARGMAXES, *TOPKS]))
def test_reduce_ops_give_onnxs_results_aclnn(case, dtype, rng, emulator):
    check(case, dtype, rng, emulator)


@pytest.mark.parametrize("case, dtype", params(IDENTITIES))
def test_reductions_over_no_axes_copy_the_input_on_the_stream_aclnn(case, dtype, rng, emulator):
    check(case, dtype, rng, emulator)
    assert emulator.aclemu_calls(b"aclrtMemcpyAsync") > 0


def test_topk_with_ties_gives_the_top_values_aclnn(rng, emulator):
    """Ties leave ONNX's indices to the lower index first and the vendor's order is not on its
    page, so only the values are held to the oracle; the emulator puts the lower index first."""
    case = TOPKS[0]
    x = rng.integers(0, 3, [4, 7]).astype(np.float32)
    values, indices = run(case, [x, ints(3)])
    np.testing.assert_array_equal(values, -np.sort(-x, axis=-1)[:, :3])
    np.testing.assert_array_equal(np.take_along_axis(x, indices, axis=-1), values)


def test_reduction_axis_out_of_range_is_refused_aclnn(rng, emulator):
    case = REDUCTIONS[0]
    refused(case, [floats(rng, [2, 3], F32), ints(2)], r"axes value 2 is outside \[-2, 1\]")


def test_repeated_reduction_axis_is_refused_aclnn(rng, emulator):
    case = REDUCTIONS[5]
    refused(case, [floats(rng, [2, 3], F32), ints(1, -1)], "axis 1 appears twice in axes")


def test_max_over_an_empty_axis_is_refused_aclnn(rng, emulator):
    case = next(c for c in REDUCTIONS if c.op == "ReduceMax")
    refused(case, [np.zeros([2, 0], np.float32), ints(1)], r"axis 1 of input \[2,0\] has size 0")


def test_cumsum_axis_out_of_range_is_refused_aclnn(rng, emulator):
    refused(CUMSUMS[0], [floats(rng, [2, 3], F32), np.array(-3, np.int64)], r"axis -3 is outside \[-2, 1\]")


def test_cumsum_axis_of_two_values_is_refused_aclnn(rng, emulator):
    refused(CUMSUMS[0], [floats(rng, [2, 3], F32), ints(0, 1)], "input 'axis' .* must hold one value")


def test_argmax_select_last_index_is_refused_aclnn(rng, emulator):
    case = Case("ArgMax", None, None, [], {"select_last_index": 1})
    refused(case, [floats(rng, [2, 3], F32)], "select_last_index=1 is not supported")


def refused_typed(case, inputs, match, output_types):
    """``refused``, for nodes whose outputs ONNX cannot type once it rejects them (an axis out of
    range): the outputs typed as the op's are, so that the kernel is what refuses the node."""
    model, feeds = node_model(case, inputs)
    for output, elem_type in zip(model.graph.output, output_types, strict=True):
        output.type.tensor_type.elem_type = elem_type
    with pytest.raises(Exception, match=match) as raised:
        aclnn_emulator.make_session(to_aclnn_domain(model)).run(feeds)
    assert case.op in str(raised.value)


def test_argmax_axis_out_of_range_is_refused_aclnn(rng, emulator):
    case = Case("ArgMax", None, None, [], {"axis": 2})
    refused_typed(case, [floats(rng, [2, 3], F32)], r"axis 2 is outside \[-2, 1\]", [TensorProto.INT64])


def test_topk_k_larger_than_the_axis_is_refused_aclnn(rng, emulator):
    refused_typed(
        TOPKS[0],
        [floats(rng, [2, 3], F32), ints(4)],
        r"K 4 is outside \[0, 3\]",
        [TensorProto.FLOAT, TensorProto.INT64],
    )


def test_topk_of_zero_gives_empty_outputs_aclnn(rng, emulator):
    values, indices = run(TOPKS[0], [floats(rng, [2, 3], F32), ints(0)])
    assert values.shape == indices.shape == (2, 0)
    assert indices.dtype == np.int64
