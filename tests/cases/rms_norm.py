"""RmsNorm's cases; the family's shapes and invalid calls, which RmsNormGrad's cases share."""

import numpy as np
from hypothesis import strategies as st

from cases import BIG, HUGE
from fuzzing import Invalid, Valid, close, extent, random, rngs
from oracles import BF16, F16, F32, PAIRS, TOL, rms_norm_oracle
from ort_ascend_ops.opschema import default

EPSILON = default("RmsNorm", "epsilon", float)


def small(t):
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((2, 16)).astype(t), "gamma": rng.standard_normal(16).astype(t)}, {}


def variants(rng):
    return [({"x": rng.standard_normal((3, 16)).astype(BF16), "gamma": np.ones(16, F32)}, {"epsilon": 1e-5})]


def resources():
    valid = {"x": np.ones((4, 24), F32), "gamma": np.ones(24, F32)}
    return valid, valid | {"gamma": np.ones(23, F32)}, {}


def concurrency():
    x = np.random.default_rng(7).standard_normal((512, 1000)).astype(BF16)
    return {"x": x, "gamma": np.ones(1000, BF16)}, {}


EMPTY_BUT_VAST = [
    ({"x": [0, BIG, BIG], "gamma": [0, BIG, BIG]}, {}, [[0, BIG, BIG], [1, 1, 1]]),
    # Outputs that would not fit: ORT's allocation error, reported for the op.
    ({"x": [HUGE, 0], "gamma": [0]}, {}, None),
]


@st.composite
def norm_shapes(draw):
    rank_x = draw(st.integers(1, 4))
    rank_gamma = draw(st.integers(1, rank_x))
    lead = [draw(extent()) for _ in range(rank_x - rank_gamma)]
    last = draw(st.one_of(extent(40), st.integers(100, 300)))
    norm = [draw(extent(3)) for _ in range(rank_gamma - 1)] + [last]
    return tuple(lead + norm), tuple(norm)


@st.composite
def valid(draw):
    x_shape, gamma_shape = draw(norm_shapes())
    t, tg = draw(st.sampled_from(PAIRS))
    rng = draw(rngs())
    attrs = draw(st.sampled_from([{}, {"epsilon": 1e-5}, {"epsilon": 0.5}, {"epsilon": 1e-12}]))
    x = random(rng, x_shape, t, draw(st.sampled_from([1.0, 1e-2, 30.0])))
    gamma = random(rng, gamma_shape, tg)

    def check(outputs):
        y, rstd = outputs
        ref_y, ref_rstd = rms_norm_oracle(x, gamma, attrs.get("epsilon", EPSILON))
        close(y, ref_y, TOL[t])
        close(rstd, ref_rstd, TOL[F32])
        assert (y.dtype, rstd.dtype) == (t, F32)

    return Valid("RmsNorm", {"x": x, "gamma": gamma}, attrs, None, check, draw(st.sampled_from([1, 2])))


BAD_PAIRS = [(F32, F16), (F32, BF16), (F16, BF16), (BF16, F16)]


@st.composite
def invalid(draw, op="RmsNorm"):
    x_shape, gamma_shape = draw(norm_shapes())
    rng = draw(rngs())
    t, tg = F32, F32
    rule = draw(
        st.sampled_from(
            ["gamma shape", "gamma rank", "x rank 0", "pair", *(["dy", "rstd"] * (op != "RmsNorm"))]
        )
    )
    names = {
        "gamma shape": "gamma",
        "gamma rank": "gamma",
        "x rank 0": "x",
        "pair": None,
        "dy": "dy",
        "rstd": "rstd",
    }
    dy_shape = x_shape
    n = len(x_shape) - len(gamma_shape)
    rstd_shape = (*x_shape[:n], *(1,) * len(gamma_shape))
    if rule == "gamma shape":
        axis = draw(st.integers(0, len(gamma_shape) - 1))
        gamma_shape = tuple(d + 1 if i == axis else d for i, d in enumerate(gamma_shape))
    elif rule == "gamma rank":
        gamma_shape = draw(st.sampled_from([(), (1, *x_shape)]))
    elif rule == "x rank 0":
        x_shape = dy_shape = ()
    elif rule == "pair":
        t, tg = draw(st.sampled_from(BAD_PAIRS))
    elif rule == "dy":
        dy_shape = (*x_shape[:-1], x_shape[-1] + 1)
    else:
        rstd_shape = (*x_shape[:n], 2) if n == 0 or np.prod(x_shape[:n]) != 2 else (3,)
    inputs = {"x": random(rng, x_shape, t), "gamma": random(rng, gamma_shape, tg)}
    if op == "RmsNorm":
        return Invalid(op, inputs, {}, {"y": t, "rstd": F32}, names[rule])
    grad = {"dy": random(rng, dy_shape, t), **inputs, "rstd": np.ones(rstd_shape, np.float32)}
    grad = {name: grad[name] for name in ("dy", "x", "rstd", "gamma")}
    return Invalid(op, grad, {}, {"dx": t, "dgamma": F32}, names[rule])


VALID = valid()
INVALID = invalid("RmsNorm")
