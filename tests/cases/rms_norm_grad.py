"""RmsNormGrad's cases."""

import numpy as np
from hypothesis import strategies as st

from cases import BIG
from cases.rms_norm import EPSILON, invalid, norm_shapes
from fuzzing import Valid, close, random, rngs
from oracles import BF16, F16, F32, PAIRS, TOL, rms_norm_grad_inputs, rms_norm_grad_oracle, rms_norm_oracle


def small(t):
    return rms_norm_grad_inputs(np.random.default_rng(0), (2, 16), (16,), t, t), {}


def variants(rng):
    return [(rms_norm_grad_inputs(rng, (2, 3, 8), (8,), F16, F32), {})]


def resources():
    valid = rms_norm_grad_inputs(np.random.default_rng(3), (4, 24), (24,), F32, F32)
    return valid, valid | {"rstd": np.ones((5, 1), F32)}, {}


def concurrency():
    return rms_norm_grad_inputs(np.random.default_rng(7), (512, 1000), (1000,), F32, F32), {}


EMPTY_BUT_VAST = [
    (
        {"dy": [0, BIG, BIG], "x": [0, BIG, BIG], "rstd": [1], "gamma": [0, BIG, BIG]},
        {},
        [[0, BIG, BIG], [0, BIG, BIG]],
    ),
]


def rstd_forms(lead, rank_gamma):
    """Every rstd shape the contract accepts for rows of shape ``lead``."""
    keepdims = (*lead, *(1,) * rank_gamma)
    squeezed = tuple(d for d in lead if d != 1)
    return [keepdims, tuple(lead), squeezed, (1, *squeezed), (*squeezed, 1, 1)]


def magnitudes(dy, x, rstd, gamma):
    """RmsNormGrad's sums over absolute values: with one normalized element dx is all
    cancellation (g - xhat^2 g with xhat^2 ~ 1), so its error is relative to these."""
    dy, x, gamma = (abs(a.astype(np.float64)) for a in (dy, x, gamma))
    n = x.ndim - gamma.ndim
    rstd = abs(rstd.astype(np.float64)).reshape(x.shape[:n] + (1,) * gamma.ndim)
    xhat, g = x * rstd, dy * gamma
    axes = tuple(range(n, x.ndim))
    mean_gx = np.sum(g * xhat, axis=axes, keepdims=True) / max(gamma.size, 1)
    return rstd * (g + xhat * mean_gx), np.sum(dy * xhat, axis=tuple(range(n)))


@st.composite
def valid(draw):
    x_shape, gamma_shape = draw(norm_shapes())
    t, tg = draw(st.sampled_from(PAIRS))
    rng = draw(rngs())
    x = random(rng, x_shape, t, draw(st.sampled_from([1.0, 1e-2, 30.0])))
    gamma = random(rng, gamma_shape, tg)
    n = len(x_shape) - len(gamma_shape)
    rstd = rms_norm_oracle(x, gamma, EPSILON)[1].astype(np.float32)
    if draw(st.booleans()):
        # Any positive rstd is valid, not only the forward's; staying near it keeps dx inside
        # float16's range.
        rstd = (rstd * np.exp(rng.standard_normal(rstd.shape) / 2)).astype(np.float32)
    rstd = rstd.reshape(draw(st.sampled_from(rstd_forms(x_shape[:n], len(gamma_shape)))))
    inputs = {"dy": random(rng, x_shape, t), "x": x, "rstd": rstd, "gamma": gamma}

    def check(outputs):
        dx, dgamma = outputs
        ref_dx, ref_dgamma = rms_norm_grad_oracle(**inputs)
        mag_dx, mag_dgamma = magnitudes(**inputs)
        close(dx, ref_dx, TOL[t], mag_dx)
        close(dgamma, ref_dgamma, TOL[F32], mag_dgamma)
        assert (dx.dtype, dgamma.dtype) == (t, F32)

    return Valid("RmsNormGrad", inputs, {}, None, check, draw(st.sampled_from([1, 2])))


def refused(rng):
    norm = rms_norm_grad_inputs(rng, (2, 3, 4), (4,), F32, F32)
    outputs = {"dx": F32, "dgamma": F32}
    return {
        "permuted rstd": (norm | {"rstd": norm["rstd"].reshape(3, 2, 1)}, {}, outputs, "rstd"),
        "flat rstd": (norm | {"rstd": norm["rstd"].reshape(6)}, {}, outputs, "rstd"),
        "gamma [1]": (norm | {"gamma": norm["gamma"][:1]}, {}, outputs, "gamma"),
        "broadcast dy": (norm | {"dy": norm["dy"][:1]}, {}, outputs, "dy"),
        "float16 x, bfloat16 gamma": (
            norm
            | {"dy": norm["dy"].astype(F16), "x": norm["x"].astype(F16), "gamma": norm["gamma"].astype(BF16)},
            {},
            {"dx": F16, "dgamma": F32},
            "gamma",
        ),
    }


VALID = valid()
INVALID = invalid("RmsNormGrad")
