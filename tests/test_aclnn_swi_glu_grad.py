"""SwiGluGrad through the aclnn backend (host emulator): aclnnSwiGluGrad's limits checked before the
vendor is called (the oracle test of every engine is in test_swi_glu_grad.py)."""

import numpy as np
import pytest
from aclnn_checks import assert_refused

from engines import run
from oracles import BF16, F16, TOL, assert_close, swi_glu_grad_inputs, swi_glu_grad_oracle

OP = "SwiGluGrad"


def test_rank_above_eight_is_refused(rng, emulator):
    inputs = swi_glu_grad_inputs(rng, (1,) * 8 + (4,), -1, np.float32)
    assert_refused(emulator, OP, inputs, {}, "rank 9; aclnnSwiGluGrad takes rank 1 to 8")


class TestInferenceProducts:
    @pytest.fixture(autouse=True)
    def soc(self, emulator):
        emulator.aclemu_set_soc(b"Ascend310P3")

    def test_refuses_bfloat16(self, rng, emulator):
        assert_refused(emulator, OP, swi_glu_grad_inputs(rng, (2, 64), -1, BF16), {}, "not bfloat16")

    def test_runs_aligned_rows(self, rng):
        inputs = swi_glu_grad_inputs(rng, (3, 64), -1, F16)
        (dx,) = run("aclnn", OP, inputs)
        assert_close(dx, swi_glu_grad_oracle(**inputs), TOL[F16])
