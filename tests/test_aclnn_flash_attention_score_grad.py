"""FlashAttentionScoreGrad through the aclnn backend (host emulator, float32 from the page's
formulas on its own) against the float64 oracle over the oracle test's cases outside TND, and the
backend's own part: zero gradients without a vendor call when there are no rows or keys, and the
page's limits refused before the vendor is called."""

import numpy as np
import pytest
from aclnn_checks import assert_refused
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented
from test_flash_attention_score_grad import CASES, check

from oracles import F16, F32, flash_attention_inputs

OP = "FlashAttentionScoreGrad"
EMPTY = ("no-keys", "empty-batch")
VENDOR_CASES = [c for c in CASES if c[1] != "TND" and not c[0].endswith(EMPTY)]


@pytest.mark.parametrize(
    ("layout", "t", "sizes"), [pytest.param(*c[1:], id=f"aclnn-{c[0]}") for c in VENDOR_CASES]
)
def test_matches_oracle(layout, t, sizes, rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, layout, t, grad=True, **sizes)
    check("aclnn", inputs, attrs, t)
    assert emulator.aclemu_calls(b"aclnnFlashAttentionScoreGrad") == 1


def test_fully_masked_rows_give_zero_gradients(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "BSND", F16, mask="bn", s1=6, s2=5, grad=True)
    inputs["atten_mask"][0, 1, 2] = True
    inputs["softmax_max"][0, 1, 2] = -np.inf
    inputs["softmax_sum"][0, 1, 2] = 0
    dq, _, _ = check("aclnn", inputs, attrs, F16)
    np.testing.assert_array_equal(dq[0, 2, 1], 0)


@pytest.mark.parametrize(
    "sizes", [{"s2": 0}, {"batch": 0}, {"s1": 0}], ids=["no-keys", "no-batch", "no-rows"]
)
def test_empty_calls_no_vendor_function(sizes, rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "BNSD", F32, grad=True, **sizes)
    for out in check("aclnn", inputs, attrs, F32):
        np.testing.assert_array_equal(out, 0)
    assert emulator.aclemu_calls(b"aclnnFlashAttentionScoreGradGetWorkspaceSize") == 0


def test_head_dim_limit(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "BSND", F16, d=769, s1=2, s2=2, grad=True)
    assert_refused(emulator, OP, inputs, attrs, "head dims D and Dv up to 768")


def test_tnd_is_not_bound_yet(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "TND", F16, grad=True)
    assert_refused(emulator, OP, inputs, attrs, "aclnnFlashAttentionVarLenScore", error=OrtNotImplemented)
