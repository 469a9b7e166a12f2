"""SwiGlu's cases; the family's shapes and invalid calls, which SwiGluGrad's cases share."""

import numpy as np
from hypothesis import strategies as st

from cases import BIG, HUGE
from fuzzing import FLOATS, Invalid, Valid, close, extent, random, rngs
from oracles import F32, TOL, swi_glu_grad_inputs, swi_glu_grad_oracle, swi_glu_oracle


def small(t):
    return {"x": np.random.default_rng(0).standard_normal((2, 32)).astype(t)}, {}


def variants(rng):
    return [({"x": rng.standard_normal((4, 3, 2)).astype(np.float16)}, {"dim": 0})]


def refused(rng):
    x = rng.standard_normal((3, 8)).astype(F32)
    return {
        "odd extent": ({"x": x[:, :7]}, {}, {"y": F32}, "x"),
        "dim past the rank": ({"x": x}, {"dim": 2}, {"y": F32}, "dim"),
    }


def resources():
    valid = {"x": np.ones((4, 24), F32)}
    return valid, {"x": np.ones((4, 23), F32)}, {}


def concurrency():
    return {"x": np.random.default_rng(7).standard_normal((512, 2000)).astype(F32)}, {}


EMPTY_BUT_VAST = [
    ({"x": [0, BIG, BIG]}, {}, [[0, BIG, BIG // 2]]),
    ({"x": [HUGE, 0, 2]}, {"dim": 0}, [[HUGE // 2, 0, 2]]),
]


@st.composite
def glu_shapes(draw):
    """(x.shape, dim): rank 1-4, the cut axis even, dim negative or not."""
    rank = draw(st.integers(1, 4))
    shape = [draw(extent()) for _ in range(rank)]
    axis = draw(st.integers(0, rank - 1))
    shape[axis] = 2 * draw(st.one_of(extent(40), st.integers(100, 300)))
    return tuple(shape), draw(st.sampled_from([axis, axis - rank]))


@st.composite
def valid(draw, op="SwiGlu"):
    shape, dim = draw(glu_shapes())
    t = draw(st.sampled_from(FLOATS))
    inputs = swi_glu_grad_inputs(draw(rngs()), shape, dim, t, scale=draw(st.sampled_from([1.0, 1e-2, 10.0])))
    if op == "SwiGlu":
        inputs = {"x": inputs["x"]}

    def check(outputs):
        ref = swi_glu_oracle(inputs["x"], dim) if op == "SwiGlu" else swi_glu_grad_oracle(**inputs, dim=dim)
        close(outputs[0], ref, TOL[t])
        assert outputs[0].dtype == t

    return Valid(op, inputs, {"dim": dim}, None, check, draw(st.sampled_from([1, 2])))


@st.composite
def invalid(draw, op="SwiGlu"):
    shape, dim = draw(glu_shapes())
    rng = draw(rngs())
    rule = draw(st.sampled_from(["odd", "dim", "x rank 0", *(["dy"] * (op != "SwiGlu"))]))
    names = {"odd": "x", "dim": "dim", "x rank 0": "x", "dy": "dy"}
    axis = dim % len(shape)
    dy_shape = list(shape)
    dy_shape[axis] //= 2
    if rule == "odd":
        shape = tuple(d + 1 if i == axis else d for i, d in enumerate(shape))
    elif rule == "dim":
        dim = draw(st.sampled_from([len(shape), -len(shape) - 1, 99]))
    elif rule == "x rank 0":
        shape, dim, dy_shape = (), -1, []
    else:
        dy_shape[axis] += 1
    x = random(rng, shape, F32)
    if op == "SwiGlu":
        return Invalid(op, {"x": x}, {"dim": dim}, {"y": F32}, names[rule])
    return Invalid(
        op, {"dy": random(rng, tuple(dy_shape), F32), "x": x}, {"dim": dim}, {"dx": F32}, names[rule]
    )


VALID = valid()
INVALID = invalid()
