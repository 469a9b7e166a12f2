"""RotaryPositionEmbedding's cases; the family's geometry and invalid calls, which
RotaryPositionEmbeddingGrad's cases share."""

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from cases import BIG, HUGE, Fault
from fuzzing import FLOATS, INT64_EXTREMES, Invalid, Valid, close, extent, random, rngs
from oracles import BF16, F16, F32, ROPE_LAYOUTS, TOL, assert_close, rope_inputs, rope_oracle

SMALL_LAYOUT = ("BSND-1S1D", (1, 2, 3, 8), (1, 2, 1, 8))


def small(t):
    return rope_inputs(np.random.default_rng(0), SMALL_LAYOUT, t, "x", "cos", "sin"), {}


def variants(rng):
    return [(rope_inputs(rng, ROPE_LAYOUTS[1], BF16, "x", "cos", "sin"), {"mode": 1})]


def resources():
    rng = np.random.default_rng(3)
    valid = {n: rng.standard_normal((1, 4, 2, 8)).astype(F32) for n in ("x", "cos", "sin")}
    return valid, valid | {"cos": valid["cos"][..., :4], "sin": valid["sin"][..., :4]}, {}


def concurrency():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 64, 8, 64)).astype(F32)
    cos, sin = (rng.standard_normal((1, 64, 1, 64)).astype(F32) for _ in range(2))
    return {"x": x, "cos": cos, "sin": sin}, {"mode": 1}


EMPTY_BUT_VAST = [
    ({"x": [HUGE, 0, 1, 4], "cos": [1, 1, 1, 4], "sin": [1, 1, 1, 4]}, {}, [[HUGE, 0, 1, 4]]),
    ({"x": [0, BIG, BIG, 2], "cos": [0, BIG, BIG, 2], "sin": [0, BIG, BIG, 2]}, {}, [[0, BIG, BIG, 2]]),
]


def fault(rng):
    # Two cos rows, so two tasks, each holding its row's float32 cos and sin (2 x D floats).
    d = 1 << 22
    failing = {name: rng.standard_normal((1, 2, 1, d), dtype=np.float32) for name in ("x", "cos", "sin")}
    valid = rope_inputs(rng, ROPE_LAYOUTS[3], F32, "x", "cos", "sin")

    def check(results):
        assert_close(results[0], rope_oracle(**valid, mode=0), TOL[F32])

    return Fault({"mode": 0}, failing, 2 * d * 4, valid, check)


@st.composite
def geometry(draw):
    """(data shape, cos shape, mode): rank 3 (TND) or 4 (BNSD, BSND, SBND alike), cos broadcast
    along any subset of the leading axes."""
    mode = draw(st.integers(0, 3))
    rank = draw(st.sampled_from([3, 4]))
    lead = [draw(extent()) for _ in range(rank - 1)]
    step = 4 if mode == 2 else 2
    d = step * draw(st.one_of(st.integers(0, 4), st.integers(5, 40)))
    table = [1 if draw(st.booleans()) else n for n in lead]
    return (*lead, d), (*table, d), mode


@st.composite
def valid(draw):
    shape, table, mode = draw(geometry())
    t = draw(st.sampled_from(FLOATS))
    rng = draw(rngs())
    inputs = {"x": random(rng, shape, t), "cos": random(rng, table, t), "sin": random(rng, table, t)}

    def check(outputs):
        (y,) = outputs
        close(y, rope_oracle(**inputs, mode=mode), TOL[t])
        assert y.dtype == t

    return Valid(
        "RotaryPositionEmbedding", inputs, {"mode": mode}, None, check, draw(st.sampled_from([1, 2]))
    )


@st.composite
def invalid(draw, op="RotaryPositionEmbedding"):
    shape, table, mode = draw(geometry())
    rng = draw(rngs())
    t = tc = F32
    grad = op != "RotaryPositionEmbedding"
    rules = ["mode", "odd D", "cos rank", "cos last axis", "cos axis", "sin shape", "data rank 0", "cos type"]
    rule = draw(st.sampled_from(rules + (["x shape", "sums without x"] if grad else [])))
    data_name = "dy" if grad else "x"
    names = {"mode": "mode", "odd D": data_name, "cos rank": "cos", "cos last axis": "cos", "cos axis": "cos"}
    names |= {"sin shape": "sin", "data rank 0": data_name, "cos type": None, "x shape": "x"}
    names["sums without x"] = "dcos"
    sin_table, x_shape, outputs = table, shape, {"dx": t} if grad else {"y": t}
    if rule == "mode":
        mode = draw(st.sampled_from([-1, 4, 5, *INT64_EXTREMES]))
    elif rule == "odd D":
        shape = (*shape[:-1], shape[-1] + (2 if mode == 2 else 1))
        table = sin_table = (*table[:-1], shape[-1])
        x_shape = shape
    elif rule == "cos rank":
        table = sin_table = draw(st.sampled_from([table[1:], (1, *table)]))
    elif rule == "cos last axis":
        assume(shape[-1] > 1)
        table = sin_table = (*table[:-1], 1)
    elif rule == "cos axis":
        axis = draw(st.integers(0, len(shape) - 2))
        table = sin_table = tuple(shape[i] + 2 if i == axis else n for i, n in enumerate(table))
    elif rule == "sin shape":
        sin_table = (*table[:-1], table[-1] + 2)
    elif rule == "data rank 0":
        shape = x_shape = ()
    elif rule == "cos type":
        tc = F16
    elif rule == "x shape":
        x_shape = (*shape[:-1], shape[-1] + 2)
    inputs = {
        data_name: random(rng, shape, t),
        "cos": random(rng, table, tc),
        "sin": random(rng, sin_table, tc),
    }
    if grad and rule != "sums without x":
        if rule == "x shape" or draw(st.booleans()):
            inputs["x"] = random(rng, x_shape, t)
    if rule == "sums without x":
        outputs = {"dx": t, "dcos": t, "dsin": t}
    return Invalid(op, inputs, {"mode": int(mode)}, outputs, names[rule])


def refused(rng):
    inputs = rope_inputs(rng, ROPE_LAYOUTS[1], F32, "x", "cos", "sin")
    return {"RoPE mode -1": (inputs, {"mode": -1}, {"y": F32}, "mode")}


VALID = valid()
INVALID = invalid("RotaryPositionEmbedding")
