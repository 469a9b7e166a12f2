"""FlashAttentionScore through the aclnn backend (host emulator, which computes the page's
formulas in float32 on its own) against the float64 oracle over the oracle test's cases outside
TND, and the backend's own part: the causal mask of modes 2 and 3 built in device memory, no
vendor call without key rows, and the page's limits refused before the vendor is called."""

import numpy as np
import pytest
from aclnn_checks import assert_refused
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented
from test_flash_attention_score import CASES, check

from oracles import F16, F32, flash_attention_inputs

OP = "FlashAttentionScore"
VENDOR_CASES = [c for c in CASES if c[1] != "TND" and "no-keys" not in c[0] and "empty-batch" not in c[0]]


@pytest.mark.parametrize(
    ("layout", "t", "sizes"), [pytest.param(*c[1:], id=f"aclnn-{c[0]}") for c in VENDOR_CASES]
)
def test_matches_oracle(layout, t, sizes, rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, layout, t, **sizes)
    check("aclnn", inputs, attrs, t)
    assert emulator.aclemu_calls(b"aclnnFlashAttentionScore") == 1


def test_fully_masked_rows_give_zero_and_minus_infinity(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "BSND", F16, mask="bn", s1=6, s2=5)
    inputs["atten_mask"][0, 1, 2] = True
    out, row_max, row_sum = check("aclnn", inputs, attrs, F16)
    np.testing.assert_array_equal(out[0, 2, 1], 0)
    assert np.all(row_max[0, 1, 2] == -np.inf) and np.all(row_sum[0, 1, 2] == 0)


@pytest.mark.parametrize(
    "sizes", [{"s2": 0}, {"batch": 0}, {"s1": 0}], ids=["no-keys", "no-batch", "no-rows"]
)
def test_empty_calls_no_vendor_function(sizes, rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "BNSD", F32, **sizes)
    check("aclnn", inputs, attrs, F32)
    assert emulator.aclemu_calls(b"aclnnFlashAttentionScoreGetWorkspaceSize") == 0


def test_head_dim_limit(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "BSND", F16, d=769, s1=2, s2=2)
    assert_refused(emulator, OP, inputs, attrs, "head dims D and Dv up to 768")


def test_tnd_is_not_bound_yet(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "TND", F16)
    assert_refused(emulator, OP, inputs, attrs, "aclnnFlashAttentionVarLenScore", error=OrtNotImplemented)
