"""RmsNorm through the aclnn backend (host emulator) against the float64 oracle, and the aclnn
page's limits checked before the vendor is called."""

import numpy as np
import pytest
from aclnn_checks import assert_refused, host_waits

from engines import run
from oracles import F16, F32, PAIRS, SHAPES, TOL, assert_close, pair_id, rms_norm_oracle

OP = "RmsNorm"


@pytest.mark.parametrize("epsilon", [None, 1e-3])
@pytest.mark.parametrize("shapes", [s for s in SHAPES if s[1] != (0,)], ids=str)
@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_matches_oracle(shapes, pair, epsilon, rng, emulator):
    inputs = {
        "x": rng.standard_normal(shapes[0]).astype(pair[0]),
        "gamma": rng.standard_normal(shapes[1]).astype(pair[1]),
    }
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    y, rstd = run("aclnn", OP, inputs, attrs)
    y_ref, rstd_ref = rms_norm_oracle(**inputs, epsilon=1e-6 if epsilon is None else epsilon)
    assert (y.dtype, rstd.dtype) == (pair[0], F32)
    assert rstd.shape == rstd_ref.shape  # keepdims form
    assert_close(y, y_ref, TOL[pair[0]])
    assert_close(rstd, rstd_ref, TOL[F32])
    # aclnn's tiling refuses empty tensors: the backend does not call it for them.
    assert emulator.aclemu_calls(b"aclnnRmsNorm") == (1 if y.size else 0)
    assert host_waits(emulator) == 0


def test_empty_normalized_axes_are_refused(emulator):
    inputs = {"x": np.zeros((3, 0), F32), "gamma": np.zeros(0, F32)}
    assert_refused(emulator, OP, inputs, {}, "refuses empty normalized axes")


def test_rank_above_eight_is_refused(rng, emulator):
    inputs = {"x": rng.standard_normal((1,) * 8 + (16,)).astype(F32), "gamma": np.ones(16, F32)}
    assert_refused(emulator, OP, inputs, {}, "rank 9; aclnnRmsNorm takes rank 1 to 8")


def test_inference_products_need_32_byte_rows(rng, emulator):
    emulator.aclemu_set_soc(b"Ascend310P1")
    short = {"x": rng.standard_normal((2, 7)).astype(F32), "gamma": np.ones(7, F32)}
    assert_refused(emulator, OP, short, {}, "at least 32 bytes")
    inputs = {"x": rng.standard_normal((2, 16)).astype(F16), "gamma": rng.standard_normal(16).astype(F16)}
    y, _ = run("aclnn", OP, inputs)
    assert_close(y, rms_norm_oracle(**inputs, epsilon=1e-6)[0], TOL[F16])
