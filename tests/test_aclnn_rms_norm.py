"""RmsNorm through the aclnn backend (host emulator): the aclnn page's limits checked before the
vendor is called (the oracle test of every engine is in test_rms_norm.py)."""

import numpy as np
from aclnn_checks import assert_refused

from engines import run
from oracles import F16, F32, TOL, assert_close, rms_norm_oracle

OP = "RmsNorm"


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
