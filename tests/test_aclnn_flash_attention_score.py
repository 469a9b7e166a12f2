"""FlashAttentionScore through the aclnn backend (host emulator, which computes the pages'
formulas in float32 on its own) against the float64 oracle over the oracle test's cases, TND
through aclnnFlashAttentionVarLenScore with the lengths as host aclIntArrays, and the backend's
own part: the causal mask of modes 2 and 3 built in device memory, no vendor call without key
rows, and the pages' limits refused before the vendor is called."""

import numpy as np
import pytest
from aclnn_checks import (
    FA_EMPTY_CASES,
    FA_EMPTY_IDS,
    FA_TND_CASES,
    InvalidArgument,
    assert_refused,
    fa_symbol,
    fa_vendor_refuses,
)
from test_flash_attention_score import CASES, check

from engines import run
from oracles import F16, F32, flash_attention_inputs

OP = "FlashAttentionScore"
VENDOR_CASES = [c for c in CASES if "no-keys" not in c[0] and "empty-batch" not in c[0]]


@pytest.mark.parametrize(
    ("layout", "t", "sizes"),
    [pytest.param(*c[1:], id=f"aclnn-{c[0]}") for c in VENDOR_CASES]
    + [pytest.param("TND", *c[1:], id=f"aclnn-{c[0]}") for c in FA_TND_CASES],
)
def test_matches_oracle(layout, t, sizes, rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, layout, t, **sizes)
    symbol = fa_symbol(OP, layout)
    if fa_vendor_refuses(inputs, attrs):
        assert_refused(emulator, OP, inputs, attrs, "S1 <= S2 in every batch", symbol=symbol)
        return
    check("aclnn", inputs, attrs, t)
    assert emulator.aclemu_calls(symbol.encode()) == 1
    # One function per layout: TND never reaches the plain one, nor the others VarLen.
    other = "aclnnFlashAttentionScore" if layout == "TND" else "aclnnFlashAttentionVarLenScore"
    assert emulator.aclemu_calls(f"{other}GetWorkspaceSize".encode()) == 0
    # TND's two lengths as host arrays, destroyed with the call (the fixture checks none is left).
    arrays = 2 if layout == "TND" else 0
    assert (
        emulator.aclemu_calls(b"aclCreateIntArray") == emulator.aclemu_calls(b"aclDestroyIntArray") == arrays
    )


def test_fully_masked_rows_give_zero_and_minus_infinity(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "BSND", F16, mask="bn", s1=6, s2=5)
    inputs["atten_mask"][0, 1, 2] = True
    out, row_max, row_sum = check("aclnn", inputs, attrs, F16)
    np.testing.assert_array_equal(out[0, 2, 1], 0)
    assert np.all(row_max[0, 1, 2] == -np.inf) and np.all(row_sum[0, 1, 2] == 0)


@pytest.mark.parametrize(("layout", "sizes"), FA_EMPTY_CASES, ids=FA_EMPTY_IDS)
def test_empty_calls_no_vendor_function(layout, sizes, rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, layout, F32, **sizes)
    check("aclnn", inputs, attrs, F32)
    assert emulator.aclemu_calls(f"{fa_symbol(OP, layout)}GetWorkspaceSize".encode()) == 0
    assert emulator.aclemu_calls(b"aclCreateIntArray") == 0


def test_head_dim_limit(rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "BSND", F16, d=769, s1=2, s2=2)
    assert_refused(emulator, OP, inputs, attrs, "head dims D and Dv up to 768")


@pytest.mark.parametrize(
    ("name", "ends", "words"),
    [
        ("actual_seq_lengths_query", (4, 3, 7), ["holds 3 at batch 1", "cumulative ends, non-decreasing"]),
        ("actual_seq_lengths_kv", (4, 8), ["ends at 8", "the tensors have 9 rows"]),
    ],
    ids=["decreasing", "short"],
)
def test_tnd_bad_lengths_refused_before_the_vendor(name, ends, words, rng, emulator):
    inputs, attrs = flash_attention_inputs(rng, "TND", F16)
    inputs[name] = np.array(ends, dtype=np.int64)
    assert_refused(emulator, OP, inputs, attrs, f"input '{name}'.*{words[0]}", symbol=fa_symbol(OP, "TND"))
    with pytest.raises(InvalidArgument, match=words[1]):
        run("aclnn", OP, inputs, attrs)


@pytest.mark.parametrize(
    ("symbol", "match"),
    [
        ("aclCreateIntArray", "aclCreateIntArray refused"),
        ("aclnnFlashAttentionVarLenScoreGetWorkspaceSize", "injected"),
        ("aclnnFlashAttentionVarLenScore", "injected"),
    ],
)
def test_tnd_failures_destroy_the_arrays(symbol, match, rng, emulator):
    emulator.aclemu_fail(symbol.encode(), 561002, b"injected")
    inputs, attrs = flash_attention_inputs(rng, "TND", F32)
    with pytest.raises(Exception, match=match):
        run("aclnn", OP, inputs, attrs)
    made = emulator.aclemu_calls(b"aclCreateIntArray") - (symbol == "aclCreateIntArray")
    assert emulator.aclemu_calls(b"aclDestroyIntArray") == made
    assert emulator.aclemu_live_tensors() == 0
