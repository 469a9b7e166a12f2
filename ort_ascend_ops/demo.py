"""``python -m ort_ascend_ops demo``: RmsNorm forward and backward through the native library and
through the portable reference functions, with their agreement and timing."""

from __future__ import annotations

import time

import ml_dtypes
import numpy as np

from .reference.model import make_op_model
from .runtime import make_session

ROWS, COLS = 2048, 4096


def _relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def _timed(session, inputs, repeats: int = 5):
    outputs = session.run(inputs)
    start = time.perf_counter()
    for _ in range(repeats):
        session.run(inputs)
    return outputs, (time.perf_counter() - start) / repeats


def _step(dtype, native: bool, inputs):
    """RmsNorm forward, then RmsNormGrad on its rstd: outputs y, rstd, dx, dgamma and the time."""
    types = {name: (a.dtype, a.shape) for name, a in inputs.items()}
    forward = make_session(make_op_model("RmsNorm", {k: types[k] for k in ("x", "gamma")}), native=native)
    (y, rstd), t_forward = _timed(forward, {"x": inputs["x"], "gamma": inputs["gamma"]})
    grad_inputs = {"dy": inputs["dy"], "x": inputs["x"], "rstd": rstd, "gamma": inputs["gamma"]}
    backward = make_session(
        make_op_model("RmsNormGrad", {name: (a.dtype, a.shape) for name, a in grad_inputs.items()}),
        native=native,
    )
    (dx, dgamma), t_backward = _timed(backward, grad_inputs)
    return {"y": y, "rstd": rstd, "dx": dx, "dgamma": dgamma}, t_forward + t_backward


def main() -> int:
    rng = np.random.default_rng(0)
    worst = 0.0
    for dtype, tolerance in [(np.float32, 1e-5), (ml_dtypes.bfloat16, 1e-2)]:
        name = np.dtype(dtype).name
        inputs = {
            "x": rng.standard_normal((ROWS, COLS), np.float32).astype(dtype),
            "gamma": (1 + 0.1 * rng.standard_normal(COLS)).astype(np.float32),
            "dy": rng.standard_normal((ROWS, COLS), np.float32).astype(dtype),
        }
        print(f"RmsNorm + RmsNormGrad, x [{ROWS}, {COLS}] {name}, gamma float32", flush=True)
        native, t_native = _step(dtype, True, inputs)
        print(f"  native library       {t_native * 1e3:8.2f} ms per step", flush=True)
        reference, t_reference = _step(dtype, False, inputs)
        print(
            f"  inlined reference    {t_reference * 1e3:8.2f} ms per step ({t_reference / t_native:.1f}x slower)"
        )
        for output in native:
            difference = _relative_difference(native[output], reference[output])
            worst = max(worst, difference / tolerance)
            print(
                f"  {output:<7} relative difference native vs reference {difference:.2e} (tolerance {tolerance:g})"
            )
    verdict = "agree" if worst <= 1 else "DISAGREE"
    print(f"verdict: native kernels and reference functions {verdict} on every output")
    return 0 if worst <= 1 else 1
