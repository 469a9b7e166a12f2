"""NonFiniteCheckAndUnscale's cases."""

import numpy as np
from hypothesis import strategies as st

from cases import BIG, HUGE
from fuzzing import Invalid, Valid, close, extent, rngs
from oracles import BF16, F16, F32, TOL, UNSCALE_TYPES, unscale_inputs, unscale_oracle

OUTPUTS = {"grads_out": F32, "found_inf_out": F32}


def small(t):
    return unscale_inputs(np.random.default_rng(0), (2, 16), t), {}


def variants(rng):
    return [
        (unscale_inputs(rng, (3, 8), F32, poison=np.inf), {}),
        (unscale_inputs(rng, (5,), F16, found=1.0), {}),
        (unscale_inputs(rng, (), BF16, poison=np.nan), {}),
    ]


def refused(rng):
    inputs = unscale_inputs(rng, (2, 5), F32)
    return {
        "two flags": (inputs | {"found_inf": np.zeros(2, F32)}, {}, OUTPUTS, "found_inf"),
        "no scale": (inputs | {"inv_scale": np.ones(0, F32)}, {}, OUTPUTS, "inv_scale"),
    }


def resources():
    valid = unscale_inputs(np.random.default_rng(3), (4, 24), F32)
    return valid, valid | {"inv_scale": np.ones(2, F32)}, {}


def concurrency():
    return unscale_inputs(np.random.default_rng(7), (512, 1000), F32, poison=np.nan), {}


EMPTY_BUT_VAST = [
    ({"scaled_grads": [0, BIG, BIG], "found_inf": [1], "inv_scale": [1]}, {}, [[0, BIG, BIG], [1]]),
    ({"scaled_grads": [HUGE, 0], "found_inf": [1, 1], "inv_scale": []}, {}, [[HUGE, 0], [1, 1]]),
]


@st.composite
def valid(draw):
    shape = tuple(draw(extent(300)) for _ in range(draw(st.integers(0, 3))))
    t = draw(st.sampled_from(UNSCALE_TYPES))
    poison = draw(st.sampled_from([None, np.inf, -np.inf, np.nan]))
    inputs = unscale_inputs(draw(rngs()), shape, t, found=draw(st.sampled_from([0.0, 1.0])), poison=poison)

    def check(outputs):
        grads, found = unscale_oracle(**inputs)
        finite = np.isfinite(grads)
        close(np.where(finite, outputs[0].astype(np.float64), 0), np.where(finite, grads, 0), TOL[t])
        np.testing.assert_array_equal(np.isnan(outputs[0].astype(np.float64)), np.isnan(grads))
        np.testing.assert_array_equal(outputs[1], found)
        assert outputs[0].dtype == t

    return Valid("NonFiniteCheckAndUnscale", inputs, {}, None, check, draw(st.sampled_from([1, 2])))


@st.composite
def invalid(draw):
    shape = tuple(draw(st.integers(1, 5)) for _ in range(draw(st.integers(1, 3))))
    inputs = unscale_inputs(draw(rngs()), shape, F32)
    rule = draw(st.sampled_from(["found_inf", "inv_scale"]))
    inputs[rule] = np.ones(draw(st.sampled_from([0, 2, 3])), F32)
    return Invalid("NonFiniteCheckAndUnscale", inputs, {}, OUTPUTS, rule)


VALID = valid()
INVALID = invalid()
