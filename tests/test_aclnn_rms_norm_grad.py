"""RmsNormGrad through the aclnn backend (host emulator): rstd's forms, and the aclnn page's limits
checked before the vendor is called (the oracle test of every engine is in test_rms_norm_grad.py)."""

import pytest
from aclnn_checks import assert_refused

from engines import run
from oracles import (
    BF16,
    F16,
    F32,
    TOL,
    assert_close,
    pair_id,
    rms_norm_grad_inputs,
    rms_norm_grad_oracle,
)

OP = "RmsNormGrad"


@pytest.mark.parametrize("rstd_shape", [(2, 3, 1), (2, 3), (1, 2, 3)])
def test_rstd_in_any_accepted_shape(rstd_shape, rng, emulator):
    inputs = rms_norm_grad_inputs(rng, (2, 3, 32), (32,), F16, F32)
    inputs["rstd"] = inputs["rstd"].reshape(rstd_shape)
    dx, dgamma = run("aclnn", OP, inputs)
    dx_ref, dgamma_ref = rms_norm_grad_oracle(**inputs)
    assert_close(dx, dx_ref, TOL[F16])
    assert_close(dgamma, dgamma_ref, TOL[F32])


def test_rank_above_eight_is_refused(rng, emulator):
    inputs = rms_norm_grad_inputs(rng, (1,) * 8 + (16,), (16,), F32, F32)
    assert_refused(emulator, OP, inputs, {}, "rank 9; aclnnRmsNormGrad takes rank 1 to 8")


def test_pair_outside_the_table_is_refused(rng, emulator):
    inputs = rms_norm_grad_inputs(rng, (2, 16), (16,), F32, F16)
    assert_refused(
        emulator, OP, inputs, {}, r"not an allowed \(T, TG\) pair", raw_outputs={"dx": F32, "dgamma": F32}
    )


class TestInferenceProducts:
    """Atlas inference (310P): no bfloat16, gamma of x's type, at least 32 bytes in the last axis."""

    @pytest.fixture(autouse=True)
    def soc(self, emulator):
        emulator.aclemu_set_soc(b"Ascend310P3")

    @pytest.mark.parametrize("pair", [(BF16, BF16), (F16, F32), (BF16, F32)], ids=pair_id)
    def test_refuses_pairs(self, pair, rng, emulator):
        inputs = rms_norm_grad_inputs(rng, (2, 32), (32,), *pair)
        assert_refused(emulator, OP, inputs, {}, "takes \\(float16, float16\\) or \\(float32, float32\\)")

    def test_refuses_short_rows(self, rng, emulator):
        inputs = rms_norm_grad_inputs(rng, (2, 15), (15,), F16, F16)
        assert_refused(emulator, OP, inputs, {}, "at least 32 bytes")

    @pytest.mark.parametrize("pair", [(F16, F16), (F32, F32)], ids=pair_id)
    def test_runs_the_pairs_it_takes(self, pair, rng, emulator):
        inputs = rms_norm_grad_inputs(rng, (3, 16), (16,), *pair)
        dx, dgamma = run("aclnn", OP, inputs)
        dx_ref, dgamma_ref = rms_norm_grad_oracle(**inputs)
        assert_close(dx, dx_ref, TOL[pair[0]])
        assert_close(dgamma, dgamma_ref, TOL[F32])


def test_old_training_products_are_refused(rng, emulator):
    emulator.aclemu_set_soc(b"Ascend910ProB")
    inputs = rms_norm_grad_inputs(rng, (2, 16), (16,), F32, F32)
    assert_refused(emulator, OP, inputs, {}, "not supported on this Ascend product")


def test_unidentified_product_leaves_limits_to_the_vendor(rng, emulator):
    emulator.aclemu_set_soc(b"")
    inputs = rms_norm_grad_inputs(rng, (2, 16), (16,), BF16, F32)
    dx, _ = run("aclnn", OP, inputs)
    assert_close(dx, rms_norm_grad_oracle(**inputs)[0], TOL[BF16])
