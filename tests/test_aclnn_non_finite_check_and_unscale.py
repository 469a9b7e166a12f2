"""NonFiniteCheckAndUnscale through the aclnn backend (host emulator): aclnnForeachNonFiniteCheckAndUnscale's
limits checked before the vendor is called, and the call as the vendor takes it (the oracle test of
every engine is in test_non_finite_check_and_unscale.py)."""

import numpy as np
from aclnn_checks import assert_refused

from engines import run
from oracles import F32, unscale_inputs

OP = "NonFiniteCheckAndUnscale"
VENDOR = "aclnnForeachNonFiniteCheckAndUnscale"


def test_rank_above_eight_is_refused(rng, emulator):
    assert_refused(
        emulator,
        OP,
        unscale_inputs(rng, (1,) * 9, F32),
        {},
        "rank 9; aclnnForeachNonFiniteCheckAndUnscale takes rank 0 to 8",
        symbol=VENDOR,
    )


def test_inference_products_are_refused(rng, emulator):
    emulator.aclemu_set_soc(b"Ascend310P1")
    assert_refused(emulator, OP, unscale_inputs(rng, (2, 8), F32), {}, "not supported on", symbol=VENDOR)


def test_one_vendor_call_over_a_list_and_nothing_left_alive(rng, emulator):
    calls = emulator.aclemu_calls(b"aclnnForeachNonFiniteCheckAndUnscale")
    lists = emulator.aclemu_calls(b"aclDestroyTensorList")
    run("aclnn", OP, unscale_inputs(rng, (4, 33), F32, poison=np.nan))
    assert emulator.aclemu_calls(b"aclnnForeachNonFiniteCheckAndUnscale") == calls + 1
    assert emulator.aclemu_calls(b"aclDestroyTensorList") == lists + 1
    assert emulator.aclemu_live_tensors() == 0


def test_empty_gradients_keep_the_flag_without_a_vendor_call(rng, emulator):
    calls = emulator.aclemu_calls(b"aclnnForeachNonFiniteCheckAndUnscaleGetWorkspaceSize")
    grads, flag = run("aclnn", OP, unscale_inputs(rng, (0, 3), F32, found=1.0))
    assert grads.shape == (0, 3) and flag.tolist() == [1.0]
    assert emulator.aclemu_calls(b"aclnnForeachNonFiniteCheckAndUnscaleGetWorkspaceSize") == calls
