"""GroupedMatmulWeightGrad through the aclnn backend (host emulator): float16 and bfloat16 through
aclnnGroupedMatmulAddV2 into a zeroed float32 accumulator and aclnnCast, float32 through
aclnnGroupedMatmulV4 with the token axis grouped; the pages' limits checked before the vendor is
called (the oracle test of every engine is in test_grouped_matmul_weight_grad.py, the emulated first
phases called directly in test_aclnn_grouped_matmul.py)."""

import numpy as np
import pytest
from aclnn_checks import assert_refused

from engines import run
from oracles import (
    BF16,
    F16,
    F32,
    TOL,
    assert_close,
    grouped_matmul_inputs,
    grouped_matmul_weight_grad_oracle,
)

OP, V4, ADD = "GroupedMatmulWeightGrad", "aclnnGroupedMatmulV4", "aclnnGroupedMatmulAddV2"
FUNCTION = {F32: V4, F16: ADD, BF16: ADD}


def grad_inputs(counts, k, n, t=F32, rng=None):
    """Inputs of ones (or random with `rng`) for `counts` rows per group."""
    if rng is not None:
        inputs = grouped_matmul_inputs(rng, counts, k, n, t)
        return {name: inputs[name] for name in ("x", "dy", "group_list")}
    m = sum(counts)
    return {"x": np.ones((m, k), t), "dy": np.ones((m, n), t), "group_list": np.array(counts, np.int64)}


def calls(emulator, *symbols):
    return [emulator.aclemu_calls(s.encode()) for s in symbols]


@pytest.mark.parametrize("t", [F32, F16, BF16], ids=str)
def test_more_than_1024_groups_are_refused(t, emulator):
    inputs = grad_inputs([1] + [0] * 1024, 2, 2, t)
    assert_refused(
        emulator, OP, inputs, {}, f"1025 counts; {FUNCTION[t]} takes at most 1024", symbol=FUNCTION[t]
    )


@pytest.mark.parametrize("tw", [0, 1])
@pytest.mark.parametrize("k, n, words", [(65536, 1, "'x' has K = 65536"), (1, 65536, "'dy' has N = 65536")])
@pytest.mark.parametrize("t", [F32, BF16], ids=str)
def test_a_last_axis_of_65536_is_refused_on_a2_and_a3(t, k, n, words, tw, emulator):
    """Either operand's free axis is the last axis of a matrix the vendor reads, transposed or not."""
    inputs = grad_inputs([1], k, n, t)
    assert_refused(emulator, OP, inputs, {"transpose_weight": tw}, words, symbol=FUNCTION[t])


@pytest.mark.parametrize("t", [F32, F16], ids=str)
def test_ascend_950_has_no_last_axis_limit(t, emulator, rng):
    emulator.aclemu_set_soc(b"Ascend950PR")
    inputs = grad_inputs([2, 0, 1], 65536, 2, t, rng)
    (dw,) = run("aclnn", OP, inputs, {"transpose_weight": 1})
    assert_close(dw, grouped_matmul_weight_grad_oracle(**inputs, transpose_weight=1), TOL[t])


@pytest.mark.parametrize(
    "soc, t, words",
    [
        (b"Ascend310P3", F16, "aclnnGroupedMatmulAddV2 is not supported on Atlas inference"),
        (b"Ascend310P3", F32, "aclnnGroupedMatmulV4 takes its weight in FRACTAL_NZ only"),
        (b"Ascend910A", BF16, "aclnnGroupedMatmulAddV2 is not supported on this Ascend product"),
    ],
    ids=["310P-f16", "310P-f32", "910A"],
)
def test_other_products_are_refused(soc, t, words, emulator):
    emulator.aclemu_set_soc(soc)
    assert_refused(emulator, OP, grad_inputs([2, 1], 4, 4, t), {}, words, symbol=FUNCTION[t])


def test_broken_counts_are_refused_before_any_kernel(emulator):
    """group_list is read on the host: the counts are checked before anything reaches the device."""
    inputs = grad_inputs([2, 1], 4, 4, BF16) | {"group_list": np.array([1, 1], np.int64)}
    assert_refused(
        emulator, OP, inputs, {}, "add up to 2; they must add up to x.shape\\[0\\] = 3", symbol=ADD
    )
    assert calls(emulator, "aclnnInplaceFillScalar", "aclnnCast") == [0, 0]


@pytest.mark.parametrize("tw", [0, 1])
@pytest.mark.parametrize("t", [F16, BF16], ids=str)
def test_16_bit_types_accumulate_in_float32_then_cast(t, tw, emulator, rng):
    """Many rows per group: the float32 sums are rounded to T once, by aclnnCast."""
    inputs = grad_inputs([900, 0, 3, 1200], 12, 20, t, rng)
    (dw,) = run("aclnn", OP, inputs, {"transpose_weight": tw})
    ref = grouped_matmul_weight_grad_oracle(**inputs, transpose_weight=tw)
    assert dw.dtype == t and dw.shape == ref.shape
    assert_close(dw, ref, TOL[t])
    assert not dw[1].astype(np.float64).any()
    assert calls(emulator, "aclnnInplaceFillScalar", ADD, "aclnnCast", V4) == [1, 1, 1, 0]


@pytest.mark.parametrize("tw", [0, 1])
def test_float32_is_one_v4_call_with_the_tokens_grouped(tw, emulator, rng):
    """The vendor's kernel writes zeros for a group of no rows: nothing is filled first."""
    inputs = grad_inputs([0, 7, 0, 5], 6, 9, F32, rng)
    (dw,) = run("aclnn", OP, inputs, {"transpose_weight": tw})
    assert_close(dw, grouped_matmul_weight_grad_oracle(**inputs, transpose_weight=tw), TOL[F32])
    assert not dw[[0, 2]].any()
    assert calls(emulator, V4, ADD, "aclnnInplaceFillScalar", "aclnnCast") == [1, 0, 0, 0]


@pytest.mark.parametrize("t", [F32, BF16], ids=str)
def test_no_rows_fill_zeros_without_the_vendor(t, emulator):
    (dw,) = run("aclnn", OP, grad_inputs([0, 0, 0], 5, 3, t), {"transpose_weight": 1})
    assert dw.shape == (3, 3, 5) and not dw.astype(np.float64).any()
    assert calls(emulator, V4, ADD, "aclnnCast", "aclnnInplaceFillScalar") == [0, 0, 0, 1]


@pytest.mark.parametrize("k, n", [(0, 4), (4, 0)], ids=["K=0", "N=0"])
def test_an_empty_gradient_calls_nothing(k, n, emulator):
    (dw,) = run("aclnn", OP, grad_inputs([3, 2], k, n, F16))
    assert dw.shape == (2, k, n)
    assert calls(emulator, V4, ADD, "aclnnCast", "aclnnInplaceFillScalar") == [0, 0, 0, 0]
