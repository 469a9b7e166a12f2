"""Independent float64 NumPy oracles, written from the contract's formulas, and the tolerances the
tests hold every path to."""

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
PAIRS = [(F32, F32), (F16, F16), (F16, F32), (BF16, BF16), (BF16, F32)]
# Relative tolerance ||out - ref|| / ||ref|| for outputs of type T; float32 outputs (rstd,
# dgamma) always use F32's.
TOL = {F32: 1e-5, F16: 2e-3, BF16: 1e-2}
SHAPES = [  # (x.shape, gamma.shape)
    ((2, 3, 64), (64,)),
    ((4, 32), (4, 32)),  # rank(gamma) == rank(x): n = 0
    ((2, 3, 4, 16), (4, 16)),  # rank(gamma) == 2
    ((0, 8), (8,)),  # empty leading extent
    ((3, 0), (0,)),  # empty normalized extent
]


def pair_id(pair):
    return f"{pair[0].name}-{pair[1].name}"


def rms_norm_oracle(x, gamma, epsilon):
    x, gamma = x.astype(np.float64), gamma.astype(np.float64)
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    mean_sq = np.sum(x * x, axis=axes, keepdims=True) / max(gamma.size, 1)
    rstd = 1.0 / np.sqrt(mean_sq + epsilon)
    return x * rstd * gamma, rstd


def rms_norm_grad_oracle(dy, x, rstd, gamma):
    dy, x, gamma = dy.astype(np.float64), x.astype(np.float64), gamma.astype(np.float64)
    n = x.ndim - gamma.ndim
    rstd = rstd.astype(np.float64).reshape(x.shape[:n] + (1,) * gamma.ndim)
    xhat = x * rstd
    g = dy * gamma
    mean_gx = np.sum(g * xhat, axis=tuple(range(n, x.ndim)), keepdims=True) / max(gamma.size, 1)
    return rstd * (g - xhat * mean_gx), np.sum(dy * xhat, axis=tuple(range(n)))


def assert_close(out, ref, tol):
    out = np.asarray(out)
    assert out.shape == ref.shape
    err = np.linalg.norm(out.astype(np.float64) - ref)
    assert err <= tol * np.linalg.norm(ref), f"relative error {err / np.linalg.norm(ref):.3g} > {tol}"


def rms_norm_grad_inputs(rng, x_shape, gamma_shape, t, tg):
    """Random RmsNormGrad inputs, with the rstd the forward would save."""
    x = rng.standard_normal(x_shape).astype(t)
    gamma = rng.standard_normal(gamma_shape).astype(tg)
    rstd = rms_norm_oracle(x, gamma, 1e-6)[1].astype(np.float32)
    return {"dy": rng.standard_normal(x_shape).astype(t), "x": x, "rstd": rstd, "gamma": gamma}
