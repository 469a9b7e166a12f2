"""GroupedMatmul's cases; the family's counts, shapes and invalid calls, which
GroupedMatmulWeightGrad's cases share."""

import numpy as np
from hypothesis import strategies as st

from cases import BIG, HUGE
from fuzzing import FLOATS, Invalid, Valid, close, extent, rngs
from oracles import F32, TOL, grouped_matmul_inputs, grouped_matmul_oracle, grouped_matmul_weight_grad_oracle

NAMES = {"GroupedMatmul": ("x", "weight", "group_list"), "GroupedMatmulWeightGrad": ("x", "dy", "group_list")}


def call(op, rng, counts, k, n, t, tw=0):
    inputs = grouped_matmul_inputs(rng, counts, k, n, t, tw)
    return {name: inputs[name] for name in NAMES[op]}, {"transpose_weight": tw}


def small(t):
    return call("GroupedMatmul", np.random.default_rng(0), (3, 0, 2), 8, 6, t)


def variants(rng):
    return [call("GroupedMatmul", rng, (4, 1, 0), 5, 3, np.float16, 1)]


def refused(rng):
    inputs, _ = call("GroupedMatmul", rng, (2, 3), 4, 5, F32)
    return {
        "counts short of M": (inputs | {"group_list": np.array([2, 2])}, {}, {"y": F32}, "group_list"),
        "negative count": (inputs | {"group_list": np.array([6, -1])}, {}, {"y": F32}, "group_list"),
        "K differs": (inputs, {"transpose_weight": 1}, {"y": F32}, "weight"),
    }


def resources():
    valid, attrs = call("GroupedMatmul", np.random.default_rng(3), (5, 0, 3), 16, 8, F32)
    return valid, valid | {"group_list": np.array([5, 0, 4])}, attrs


def concurrency():
    return call("GroupedMatmul", np.random.default_rng(7), (900, 0, 300, 650), 256, 1100, F32, 1)


EMPTY_BUT_VAST = [
    ({"x": [0, BIG], "weight": [0, BIG, BIG], "group_list": [0]}, {}, [[0, BIG]]),
    ({"x": [0, 0], "weight": [2, 0, HUGE], "group_list": [2]}, {}, [[0, HUGE]]),
    ({"x": [0, 0], "weight": [1, HUGE, 0], "group_list": [1]}, {"transpose_weight": 1}, [[0, HUGE]]),
]


def oracle(op, inputs, tw):
    """The float64 result, and the same sums over absolute values (the scale its error is held to)."""
    formula = grouped_matmul_oracle if op == "GroupedMatmul" else grouped_matmul_weight_grad_oracle
    absolute = {
        name: np.abs(a.astype(np.float64)) if a.dtype != np.int64 else a for name, a in inputs.items()
    }
    return formula(**inputs, transpose_weight=tw), formula(**absolute, transpose_weight=tw)


@st.composite
def counts(draw):
    return tuple(draw(st.lists(st.one_of(extent(3), st.integers(200, 300)), min_size=0, max_size=5)))


@st.composite
def valid(draw, op="GroupedMatmul"):
    t = draw(st.sampled_from(FLOATS))
    tw = draw(st.sampled_from([0, 1]))
    inputs, attrs = call(op, draw(rngs()), draw(counts()), draw(extent(40)), draw(extent(600)), t, tw)

    def check(outputs):
        ref, scale = oracle(op, inputs, tw)
        close(outputs[0], ref, TOL[t], scale)
        assert outputs[0].dtype == t

    return Valid(op, inputs, attrs, None, check, draw(st.sampled_from([1, 2])))


@st.composite
def invalid(draw, op="GroupedMatmul"):
    rule = draw(
        st.sampled_from(
            ["sum", "negative", "x rank", *(["experts", "k"] if op == "GroupedMatmul" else ["rows"])]
        )
    )
    group_counts = draw(counts().filter(len))
    inputs, attrs = call(op, draw(rngs()), group_counts, draw(extent(8)), draw(extent(8)), F32)
    names = {
        "sum": "group_list",
        "negative": "group_list",
        "x rank": "x",
        "experts": "group_list",
        "k": "weight",
        "rows": "dy",
    }
    listed = np.array(group_counts, np.int64)
    if rule == "sum":
        inputs["group_list"] = (
            listed + np.eye(len(listed), dtype=np.int64)[draw(st.integers(0, len(listed) - 1))]
        )
    elif rule == "negative":
        listed[draw(st.integers(0, len(listed) - 1))] = draw(
            st.sampled_from([-1, -(2**62), np.iinfo(np.int64).min])
        )
        inputs["group_list"] = listed
    elif rule == "x rank":
        inputs["x"] = inputs["x"][None]
    elif rule == "experts":
        inputs["group_list"] = np.concatenate([listed, [0]])
    elif rule == "k":
        e, k, n = inputs["weight"].shape
        inputs["weight"] = np.ones((e, k + 1, n), F32)
    else:
        inputs["dy"] = np.concatenate([inputs["dy"], np.zeros((1, inputs["dy"].shape[1]), F32)])
    output = "y" if op == "GroupedMatmul" else "dweight"
    return Invalid(op, inputs, attrs, {output: F32}, names[rule])


VALID = valid()
INVALID = invalid()
