"""ApplyAdamW's cases."""

import numpy as np
from hypothesis import strategies as st

from cases import BIG, HUGE
from fuzzing import Invalid, Valid, close, extent, rngs
from oracles import ADAMW_PAIRS, F16, F32, TOL, adam_w_inputs, adam_w_oracle

OUTPUTS = {"param_out": F32, "exp_avg_out": F32, "exp_avg_sq_out": F32}


def small(t):
    # A 16-bit parameter takes its own gradient type; float32 takes any.
    return adam_w_inputs(np.random.default_rng(0), (2, 16), t, t), {}


def variants(rng):
    inputs = adam_w_inputs(rng, (3, 8), F32, F16, step=7)
    return [
        (inputs, {"maximize": 1, "weight_decay": 0.1}),
        (inputs | {"step": np.array([2.0], F32)}, {"beta1": 0.3}),
    ]


def refused(rng):
    inputs = adam_w_inputs(rng, (2, 5), F32, F32)
    return {
        "step 0": (inputs | {"step": np.array([0], np.int64)}, {}, OUTPUTS, "step"),
        "two learning rates": (inputs | {"lr": np.ones(2, F32)}, {}, OUTPUTS, "lr"),
        "grad of another shape": (inputs | {"grad": inputs["grad"][:1]}, {}, OUTPUTS, "grad"),
        "exp_avg_sq of another shape": (
            inputs | {"exp_avg_sq": inputs["exp_avg_sq"].T},
            {},
            OUTPUTS,
            "exp_avg_sq",
        ),
        "maximize 2": (inputs, {"maximize": 2}, OUTPUTS, "maximize"),
    }


def resources():
    valid = adam_w_inputs(np.random.default_rng(3), (4, 24), F32, F32)
    return valid, valid | {"grad": np.ones((4, 23), F32)}, {}


def concurrency():
    return adam_w_inputs(np.random.default_rng(7), (512, 1000), F32, F32), {}


EMPTY_BUT_VAST = [
    (
        {
            "param": [0, BIG, BIG],
            "exp_avg": [0, BIG, BIG],
            "exp_avg_sq": [0, BIG, BIG],
            "grad": [0, BIG, BIG],
            "step": [1],
            "lr": [1],
        },
        {},
        [[0, BIG, BIG]] * 3,
    ),
    # Outputs that would not fit: ORT's allocation error, reported for the op.
    (
        {
            "param": [HUGE, 0],
            "exp_avg": [HUGE, 0],
            "exp_avg_sq": [HUGE, 0],
            "grad": [HUGE, 0],
            "step": [1],
            "lr": [1],
        },
        {},
        [[HUGE, 0]] * 3,
    ),
]


@st.composite
def valid(draw):
    shape = tuple(draw(extent(300)) for _ in range(draw(st.integers(1, 3))))
    pair = draw(st.sampled_from(ADAMW_PAIRS))
    rng = draw(rngs())
    attrs = draw(st.sampled_from([{}, {"maximize": 1}, {"beta1": 0.5, "beta2": 0.9, "weight_decay": 0.0}]))
    inputs = adam_w_inputs(
        rng, shape, *pair, step=draw(st.integers(1, 10_000)), lr=draw(st.sampled_from([1e-4, 1.0]))
    )

    def check(outputs):
        for out, ref in zip(outputs, adam_w_oracle(**inputs, **attrs), strict=True):
            close(out, ref, TOL[pair[0]])
            assert out.dtype == pair[0]

    return Valid("ApplyAdamW", inputs, attrs, None, check, draw(st.sampled_from([1, 2])))


@st.composite
def invalid(draw):
    shape = tuple(draw(st.integers(1, 5)) for _ in range(draw(st.integers(1, 3))))
    inputs = adam_w_inputs(draw(rngs()), shape, F32, F32)
    rule = draw(st.sampled_from(["step", "lr", "grad", "exp_avg"]))
    if rule == "step":
        inputs["step"] = np.array([draw(st.sampled_from([0, -3]))], np.int64)
    elif rule == "lr":
        inputs["lr"] = np.ones(draw(st.sampled_from([0, 2])), F32)
    else:
        inputs[rule] = np.ones((*shape[:-1], shape[-1] + 1), F32)
    return Invalid("ApplyAdamW", inputs, {}, OUTPUTS, rule)


VALID = valid()
INVALID = invalid()
