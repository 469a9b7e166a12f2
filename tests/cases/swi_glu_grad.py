"""SwiGluGrad's cases."""

import numpy as np

from cases import BIG, HUGE
from cases.swi_glu import invalid, valid
from oracles import F32, swi_glu_grad_inputs


def small(t):
    return swi_glu_grad_inputs(np.random.default_rng(0), (2, 32), -1, t), {}


def variants(rng):
    return [(swi_glu_grad_inputs(rng, (4, 3, 2), 0, np.float16), {"dim": 0})]


def refused(rng):
    inputs = swi_glu_grad_inputs(rng, (3, 8), -1, F32)
    return {
        "dy not halved": (inputs | {"dy": inputs["x"]}, {}, {"dx": F32}, "dy"),
        "dim past the rank": (inputs, {"dim": -3}, {"dx": F32}, "dim"),
    }


def resources():
    valid = swi_glu_grad_inputs(np.random.default_rng(3), (4, 24), -1, F32)
    return valid, valid | {"dy": np.ones((4, 11), F32)}, {}


def concurrency():
    return swi_glu_grad_inputs(np.random.default_rng(7), (512, 2000), -1, F32), {}


EMPTY_BUT_VAST = [
    ({"dy": [0, BIG, BIG // 2], "x": [0, BIG, BIG]}, {}, [[0, BIG, BIG]]),
    ({"dy": [HUGE // 2, 0], "x": [HUGE, 0]}, {"dim": 0}, [[HUGE, 0]]),
]

VALID = valid("SwiGluGrad")
INVALID = invalid("SwiGluGrad")
