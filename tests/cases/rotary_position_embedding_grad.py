"""RotaryPositionEmbeddingGrad's cases."""

import numpy as np
from hypothesis import strategies as st

from cases import HUGE, Fault
from cases.rotary_position_embedding import SMALL_LAYOUT, geometry, invalid
from fuzzing import FLOATS, Valid, close, random, rngs
from oracles import BF16, F32, ROPE_LAYOUTS, TOL, assert_close, rope_grad_oracle, rope_inputs


def small(t):
    return rope_inputs(np.random.default_rng(0), SMALL_LAYOUT, t, "dy", "cos", "sin", "x"), {}


def variants(rng):
    inputs = rope_inputs(rng, ROPE_LAYOUTS[1], BF16, "dy", "cos", "sin", "x")
    return [(inputs, {"mode": 3}), ({n: inputs[n] for n in ("dy", "cos", "sin")}, {"mode": 2})]


def resources():
    rng = np.random.default_rng(3)
    dy, cos, sin = (rng.standard_normal((1, 4, 2, 8)).astype(F32) for _ in range(3))
    valid = {"dy": dy, "cos": cos, "sin": sin, "x": dy}
    return valid, valid | {"x": dy[:, :2]}, {"mode": 1}


def concurrency():
    rng = np.random.default_rng(7)
    dy = rng.standard_normal((2, 64, 8, 64)).astype(F32)
    cos, sin = (rng.standard_normal((1, 64, 1, 64)).astype(F32) for _ in range(2))
    return {"dy": dy, "cos": cos, "sin": sin, "x": dy[::-1].copy()}, {"mode": 0}


EMPTY_BUT_VAST = [
    (
        {"dy": [HUGE, 0, 1, 4], "cos": [1, 1, 1, 4], "sin": [1, 1, 1, 4], "x": [HUGE, 0, 1, 4]},
        {},
        [[HUGE, 0, 1, 4], [1, 1, 1, 4], [1, 1, 1, 4]],
    ),
]


def fault(rng):
    # Two cos rows, so two tasks, each holding its row's float32 tables: cos, sin, dcos and dsin
    # (4 x D floats).
    d = 1 << 21
    names = ("dy", "cos", "sin", "x")
    failing = {name: rng.standard_normal((1, 2, 1, d), dtype=np.float32) for name in names}
    valid = rope_inputs(rng, ROPE_LAYOUTS[3], F32, *names)

    def check(results):
        refs = rope_grad_oracle(valid["dy"], valid["cos"], valid["sin"], valid["x"], 0)
        for out, ref in zip(results, refs, strict=True):
            assert_close(out, ref, TOL[F32])

    return Fault({"mode": 0}, failing, 3 * 2 * d * 4, valid, check)


@st.composite
def valid(draw):
    shape, table, mode = draw(geometry())
    t = draw(st.sampled_from(FLOATS))
    rng = draw(rngs())
    inputs = {"dy": random(rng, shape, t), "cos": random(rng, table, t), "sin": random(rng, table, t)}
    outputs = ["dx"]
    if draw(st.booleans()):
        inputs["x"] = random(rng, shape, t)
        outputs += draw(st.sampled_from([["dcos", "dsin"], ["dcos"], ["dsin"], []]))

    def check(produced):
        refs = rope_grad_oracle(inputs["dy"], inputs["cos"], inputs["sin"], inputs.get("x"), mode)
        by_name = dict(zip(["dx", "dcos", "dsin"], refs, strict=True))
        for name, out in zip(outputs, produced, strict=True):
            close(out, by_name[name], TOL[t])
            assert out.dtype == t

    attrs = {"mode": mode}
    return Valid("RotaryPositionEmbeddingGrad", inputs, attrs, outputs, check, draw(st.sampled_from([1, 2])))


def refused(rng):
    inputs = rope_inputs(rng, ROPE_LAYOUTS[1], F32, "dy", "cos", "sin", "x")
    outputs = {"dx": F32, "dcos": F32, "dsin": F32}
    return {
        "RoPE mode 7": (inputs, {"mode": 7}, outputs, "mode"),
        "dcos without x": ({n: inputs[n] for n in ("dy", "cos", "sin")}, {}, outputs, "dcos"),
    }


VALID = valid()
INVALID = invalid("RotaryPositionEmbeddingGrad")
