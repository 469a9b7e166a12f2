"""Run by test_*_baseline_isa tests in a process with ORT_ASCEND_OPS_ISA=baseline: every op's native
kernel, through its plain-loop path, against the oracles. Exits non-zero on the first mismatch."""

import numpy as np

from harness import run_op
from oracles import F32, PAIRS, TOL, assert_close, rms_norm_grad_oracle, rms_norm_oracle


def check_rms_norm_family(rng):
    for t, tg in PAIRS:
        x = rng.standard_normal((9, 333)).astype(t)
        gamma = rng.standard_normal(333).astype(tg)
        y, rstd = run_op("RmsNorm", {"x": x, "gamma": gamma}, {"epsilon": 1e-6})
        y_ref, rstd_ref = rms_norm_oracle(x, gamma, 1e-6)
        assert_close(y, y_ref, TOL[t])
        assert_close(rstd, rstd_ref, TOL[F32])
        dy = rng.standard_normal(x.shape).astype(t)
        inputs = {"dy": dy, "x": x, "rstd": rstd, "gamma": gamma}
        dx, dgamma = run_op("RmsNormGrad", inputs)
        dx_ref, dgamma_ref = rms_norm_grad_oracle(**inputs)
        assert_close(dx, dx_ref, TOL[t])
        assert_close(dgamma, dgamma_ref, TOL[F32])


if __name__ == "__main__":
    check_rms_norm_family(np.random.default_rng(7))
