"""SwiGlu through the aclnn backend (host emulator): aclnnSwiGlu's limits checked before the vendor
is called (the oracle test of every engine is in test_swi_glu.py)."""

import numpy as np
import pytest
from aclnn_checks import assert_refused

from engines import run
from oracles import BF16, F16, F32, TOL, assert_close, swi_glu_oracle

OP = "SwiGlu"


def test_rank_above_eight_is_refused(emulator):
    assert_refused(
        emulator, OP, {"x": np.ones((1,) * 8 + (4,), F32)}, {}, "rank 9; aclnnSwiGlu takes rank 1 to 8"
    )


class TestInferenceProducts:
    """Atlas inference (310P): no bfloat16, and x's last axis a multiple of 64 bytes."""

    @pytest.fixture(autouse=True)
    def soc(self, emulator):
        emulator.aclemu_set_soc(b"Ascend310P3")

    def test_refuses_bfloat16(self, emulator):
        assert_refused(emulator, OP, {"x": np.ones((2, 64), BF16)}, {}, "not bfloat16")

    def test_refuses_unaligned_rows(self, emulator):
        assert_refused(emulator, OP, {"x": np.ones((2, 24), F16)}, {}, "multiple of 64 bytes")

    @pytest.mark.parametrize("t", [F16, F32], ids=str)
    def test_runs_aligned_rows(self, t, rng):
        x = rng.standard_normal((3, 64)).astype(t)
        (y,) = run("aclnn", OP, {"x": x})
        assert_close(y, swi_glu_oracle(x), TOL[t])
