"""ApplyAdamW through the aclnn backend (host emulator): aclnnApplyAdamWV2's limits checked before
the vendor is called (the oracle test of every engine is in test_apply_adam_w.py)."""

import numpy as np
from aclnn_checks import assert_refused

from oracles import BF16, F32, adam_w_inputs

OP = "ApplyAdamW"


def test_a_gradient_of_another_type_is_refused(rng, emulator):
    assert_refused(emulator, OP, adam_w_inputs(rng, (2, 8), F32, BF16), {}, "takes 'grad' of param's type")


def test_rank_above_eight_is_refused(rng, emulator):
    assert_refused(
        emulator, OP, adam_w_inputs(rng, (1,) * 9, F32, F32), {}, "rank 9; aclnnApplyAdamW takes rank 1 to 8"
    )


def test_inference_products_are_refused(rng, emulator):
    emulator.aclemu_set_soc(b"Ascend310P1")
    assert_refused(emulator, OP, adam_w_inputs(rng, (2, 8), F32, F32), {}, "not supported on")


def test_a_fractional_step_is_refused(rng, emulator):
    inputs = adam_w_inputs(rng, (2, 8), F32, F32) | {"step": np.array([1.5], F32)}
    assert_refused(emulator, OP, inputs, {}, "counts whole steps")
