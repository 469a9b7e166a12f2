"""FlashAttentionScoreGrad through the aclnn backend (host emulator, float32 from the pages'
formulas on its own) against the float64 oracle over the oracle test's cases, TND through
aclnnFlashAttentionUnpaddingScoreGrad with the lengths as host aclIntArrays, and the backend's
own part: zero gradients without a vendor call when there are no rows or keys, and the pages'
limits refused before the vendor is called."""

import numpy as np
import pytest
from aclnn_checks import (
    FA_EMPTY_CASES,
    FA_EMPTY_IDS,
    FA_TND_CASES,
    assert_refused,
    fa_symbol,
    fa_vendor_refuses,
)
from test_flash_attention_score_grad import CASES, check

from engines import run
from oracles import F16, F32, flash_attention_inputs

OP = "FlashAttentionScoreGrad"
EMPTY = ("no-keys", "empty-batch")
VENDOR_CASES = [c for c in CASES if not c[0].endswith(EMPTY)]


@pytest.mark.parametrize(
    ("layout", "t", "sizes"),
    [pytest.param(*c[1:], id=f"aclnn-{c[0]}") for c in VENDOR_CASES]
    + [pytest.param("TND", *c[1:], id=f"aclnn-{c[0]}") for c in FA_TND_CASES],
)
def test_matches_oracle(layout, t, sizes, rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, layout, t, grad=True, **sizes)
    symbol = fa_symbol(OP, layout)
    if fa_vendor_refuses(inputs, attrs):
        assert_refused(emulator, OP, inputs, attrs, "S1 <= S2 in every batch", symbol=symbol)
        return
    check("aclnn", inputs, attrs, t)
    assert emulator.aclemu_calls(symbol.encode()) == 1
    # One function per layout: TND never reaches the plain one, nor the others Unpadding.
    other = "aclnnFlashAttentionScoreGrad" if layout == "TND" else "aclnnFlashAttentionUnpaddingScoreGrad"
    assert emulator.aclemu_calls(f"{other}GetWorkspaceSize".encode()) == 0
    # TND's two lengths as host arrays, destroyed with the call (the fixture checks none is left).
    arrays = 2 if layout == "TND" else 0
    assert (
        emulator.aclemu_calls(b"aclCreateIntArray") == emulator.aclemu_calls(b"aclDestroyIntArray") == arrays
    )


def test_fully_masked_rows_give_zero_gradients(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "BSND", F16, mask="bn", s1=6, s2=5, grad=True)
    inputs["atten_mask"][0, 1, 2] = True
    inputs["softmax_max"][0, 1, 2] = -np.inf
    inputs["softmax_sum"][0, 1, 2] = 0
    dq, _, _ = check("aclnn", inputs, attrs, F16)
    np.testing.assert_array_equal(dq[0, 2, 1], 0)


@pytest.mark.parametrize(("layout", "sizes"), FA_EMPTY_CASES, ids=FA_EMPTY_IDS)
def test_empty_calls_no_vendor_function(layout, sizes, rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, layout, F32, grad=True, **sizes)
    for out in check("aclnn", inputs, attrs, F32):
        np.testing.assert_array_equal(out, 0)
    assert emulator.aclemu_calls(f"{fa_symbol(OP, layout)}GetWorkspaceSize".encode()) == 0
    assert emulator.aclemu_calls(b"aclCreateIntArray") == 0


def test_head_dim_limit(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "BSND", F16, d=769, s1=2, s2=2, grad=True)
    assert_refused(emulator, OP, inputs, attrs, "head dims D and Dv up to 768")


def test_tnd_head_dim_limit(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "TND", F16, d=513, grad=True)
    assert_refused(
        emulator, OP, inputs, attrs, "TND.*head dims D and Dv up to 512", symbol=fa_symbol(OP, "TND")
    )


def test_tnd_decreasing_lengths_refused_before_the_vendor(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "TND", F32, grad=True)
    inputs["actual_seq_lengths_kv"] = np.array([9, 4], dtype=np.int64)
    match = "input 'actual_seq_lengths_kv' holds 4 at batch 1; it must be cumulative ends, non-decreasing"
    assert_refused(emulator, OP, inputs, attrs, match, symbol=fa_symbol(OP, "TND"))


@pytest.mark.parametrize(
    "symbol", ["aclCreateIntArray", f"{fa_symbol(OP, 'TND')}GetWorkspaceSize", fa_symbol(OP, "TND")]
)
def test_tnd_failures_destroy_the_arrays(symbol, rng, emulator):
    emulator.aclemu_fail(symbol.encode(), 561002, b"injected")
    inputs, attrs = flash_attention_inputs(rng, "TND", F32, grad=True)
    with pytest.raises(
        Exception, match="aclCreateIntArray refused" if symbol == "aclCreateIntArray" else "injected"
    ):
        run("aclnn", OP, inputs, attrs)
    made = emulator.aclemu_calls(b"aclCreateIntArray") - (symbol == "aclCreateIntArray")
    assert emulator.aclemu_calls(b"aclDestroyIntArray") == made
    assert emulator.aclemu_live_tensors() == 0
