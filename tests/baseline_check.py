"""Run by test_*_baseline_isa tests in a process with ORT_ASCEND_OPS_ISA=baseline: every op's native
kernel, through its plain-loop path, against the oracles. Exits non-zero on the first mismatch."""

import sys

import numpy as np

from engines import run
from oracles import (
    F32,
    PAIRS,
    ROPE_LAYOUTS,
    ROPE_MODES,
    TOL,
    assert_close,
    rms_norm_grad_oracle,
    rms_norm_oracle,
    rope_grad_oracle,
    rope_oracle,
)


def check_rms_norm_family(rng):
    for t, tg in PAIRS:
        x = rng.standard_normal((9, 333)).astype(t)
        gamma = rng.standard_normal(333).astype(tg)
        y, rstd = run("native", "RmsNorm", {"x": x, "gamma": gamma}, {"epsilon": 1e-6})
        y_ref, rstd_ref = rms_norm_oracle(x, gamma, 1e-6)
        assert_close(y, y_ref, TOL[t])
        assert_close(rstd, rstd_ref, TOL[F32])
        dy = rng.standard_normal(x.shape).astype(t)
        inputs = {"dy": dy, "x": x, "rstd": rstd, "gamma": gamma}
        dx, dgamma = run("native", "RmsNormGrad", inputs)
        dx_ref, dgamma_ref = rms_norm_grad_oracle(**inputs)
        assert_close(dx, dx_ref, TOL[t])
        assert_close(dgamma, dgamma_ref, TOL[F32])


def check_rope_family(rng):
    for t in {t for t, _ in PAIRS}:
        for mode in ROPE_MODES:
            for _, shape, table_shape in ROPE_LAYOUTS[::3]:
                x, dy = (rng.standard_normal(shape).astype(t) for _ in range(2))
                cos, sin = (rng.standard_normal(table_shape).astype(t) for _ in range(2))
                (y,) = run(
                    "native", "RotaryPositionEmbedding", {"x": x, "cos": cos, "sin": sin}, {"mode": mode}
                )
                assert_close(y, rope_oracle(x, cos, sin, mode), TOL[t])
                inputs = {"dy": dy, "cos": cos, "sin": sin, "x": x}
                outputs = run("native", "RotaryPositionEmbeddingGrad", inputs, {"mode": mode})
                for out, ref in zip(outputs, rope_grad_oracle(**inputs, mode=mode), strict=True):
                    assert_close(out, ref, 2 * TOL[t])


FAMILIES = {"rms_norm": check_rms_norm_family, "rope": check_rope_family}

if __name__ == "__main__":
    for name in sys.argv[1:] or FAMILIES:
        FAMILIES[name](np.random.default_rng(7))
