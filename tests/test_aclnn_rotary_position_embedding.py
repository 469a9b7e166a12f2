"""RotaryPositionEmbedding through the aclnn backend (host emulator): the modes, layouts and dtypes
the aclnn page allows on each product family (CASES, which the oracle tests of
test_rotary_position_embedding*.py run), and its limits checked before the vendor is called."""

import numpy as np
import pytest
from aclnn_checks import assert_refused

from engines import run
from oracles import BF16, F16, F32, ROPE_LAYOUTS, TOL, assert_close, rope_inputs, rope_oracle

OP = "RotaryPositionEmbedding"
DTYPES = [F32, F16, BF16]
A2, A3, ASCEND_950, INFERENCE = b"Ascend910B2", b"Ascend910_9392", b"Ascend950PR_9599", b"Ascend310P3"
# Interleave mode on Atlas A2/A3 takes the position-only cos layouts.
POSITION_ONLY = {"BNSD-11SD", "BSND-1S1D", "SBND-S11D", "TND-T1D"}


def case_id(value):
    if isinstance(value, bytes):
        return value.decode()
    return value[0] if isinstance(value, tuple) else str(value)


def allowed(soc, mode, layout):
    if soc == ASCEND_950:
        return True
    # Mode 3 runs as mode 0 on the de-interleaved last axis (an aclnnPermute on the device).
    return mode in (0, 3) or (mode == 1 and layout[0] in POSITION_ONLY)


CASES = [
    (soc, mode, layout)
    for soc in (A2, A3, ASCEND_950)
    for mode in (0, 1, 2, 3)
    for layout in ROPE_LAYOUTS
    if (soc != A3 or layout[0].endswith(("11SD", "T1D"))) and allowed(soc, mode, layout)
]
# The 950's page describes the grad for four-axis tensors only.
GRAD_CASES = [(soc, mode, layout) for soc, mode, layout in CASES if soc != ASCEND_950 or len(layout[1]) == 4]


def test_atlas_refuses_mode_2(rng, emulator):
    inputs = rope_inputs(rng, ROPE_LAYOUTS[0], F32, "x", "cos", "sin")
    assert_refused(emulator, OP, inputs, {"mode": 2}, "mode 2 needs Ascend 950")


@pytest.mark.parametrize("soc", [A2, A3], ids=["A2", "A3"])
def test_atlas_runs_mode_3_as_mode_0_on_the_deinterleaved_axis(soc, rng, emulator):
    """The vendor's kernel has mode 3 on Ascend 950 only: an A2/A3 permutes on the device and
    calls mode 0 (the emulator counts the calls), never the host."""
    emulator.aclemu_set_soc(soc)
    emulator.aclemu_reset()
    inputs = rope_inputs(rng, ROPE_LAYOUTS[0], F32, "x", "cos", "sin")
    (y,) = run("aclnn", OP, inputs, {"mode": 3})
    assert_close(y, rope_oracle(**inputs, mode=3), TOL[F32])
    assert emulator.aclemu_calls(b"aclnnPermute") == 1


@pytest.mark.parametrize(
    "layout", [lay for lay in ROPE_LAYOUTS if lay[0] not in POSITION_ONLY], ids=lambda v: v[0]
)
def test_atlas_interleave_refuses_per_token_tables(layout, rng, emulator):
    inputs = rope_inputs(rng, layout, F16, "x", "cos", "sin")
    assert_refused(emulator, OP, inputs, {"mode": 1}, "is not a layout aclnnRotaryPositionEmbedding takes")


@pytest.mark.parametrize(
    ("soc", "d", "rule"), [(A2, 896, "below 896"), (ASCEND_950, 1028, "at most 1024")], ids=["A2", "950"]
)
def test_head_dim_limit(soc, d, rule, rng, emulator):
    emulator.aclemu_set_soc(soc)
    layout = ("BSND-1S1D", (1, 2, 1, d), (1, 2, 1, d))
    assert_refused(emulator, OP, rope_inputs(rng, layout, F32, "x", "cos", "sin"), {}, rule)


def test_atlas_half_mode_batch_limit(rng, emulator):
    layout = ("BNSD-11SD", (1000, 1, 2, 8), (1, 1, 2, 8))
    assert_refused(emulator, OP, rope_inputs(rng, layout, F32, "x", "cos", "sin"), {}, "below 1000")


def test_rank_outside_3_to_4_is_refused(rng, emulator):
    inputs = {
        "x": rng.standard_normal((4, 8)).astype(F32),
        "cos": np.ones((4, 8), F32),
        "sin": np.ones((4, 8), F32),
    }
    assert_refused(emulator, OP, inputs, {}, "rank 2; aclnnRotaryPositionEmbedding takes rank 3 to 4")


class TestInferenceProducts:
    """Atlas inference (310P): mode 0, float16/float32, D a multiple of 32 up to 128."""

    @pytest.fixture(autouse=True)
    def soc(self, emulator):
        emulator.aclemu_set_soc(INFERENCE)

    @pytest.mark.parametrize("t", [F32, F16], ids=lambda t: t.name)
    def test_runs_what_it_takes(self, t, rng, emulator):
        layout = ("BSND-1S1D", (2, 3, 2, 64), (1, 3, 1, 64))
        inputs = rope_inputs(rng, layout, t, "x", "cos", "sin")
        (y,) = run("aclnn", OP, inputs)
        assert_close(y, rope_oracle(**inputs, mode=0), TOL[t])

    @pytest.mark.parametrize(("mode", "t", "d"), [(1, F16, 64), (0, BF16, 64), (0, F16, 48), (0, F32, 160)])
    def test_refuses_the_rest(self, mode, t, d, rng, emulator):
        layout = ("BSND-1S1D", (2, 3, 2, d), (1, 3, 1, d))
        inputs = rope_inputs(rng, layout, t, "x", "cos", "sin")
        assert_refused(emulator, OP, inputs, {"mode": mode}, "takes mode 0, float16 or float32")
