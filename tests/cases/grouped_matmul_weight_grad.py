"""GroupedMatmulWeightGrad's cases."""

import numpy as np

from cases import BIG, HUGE
from cases.grouped_matmul import call, invalid, valid
from oracles import F32

OP = "GroupedMatmulWeightGrad"


def small(t):
    return call(OP, np.random.default_rng(0), (3, 0, 2), 8, 6, t)


def variants(rng):
    return [call(OP, rng, (4, 1, 0), 5, 3, np.float16, 1)]


def refused(rng):
    inputs, _ = call(OP, rng, (2, 3), 4, 5, F32)
    return {
        "counts past M": (inputs | {"group_list": np.array([2, 4])}, {}, {"dweight": F32}, "group_list"),
        "dy's rows differ": (inputs | {"dy": inputs["dy"][:4]}, {}, {"dweight": F32}, "dy"),
    }


def resources():
    valid, attrs = call(OP, np.random.default_rng(3), (5, 0, 3), 16, 8, F32)
    return valid, valid | {"group_list": np.array([5, 0, 2])}, attrs


def concurrency():
    return call(OP, np.random.default_rng(7), (900, 0, 300, 650), 300, 520, F32)


EMPTY_BUT_VAST = [
    ({"x": [0, BIG], "dy": [0, BIG], "group_list": [0]}, {}, [[0, BIG, BIG]]),
    ({"x": [0, 0], "dy": [0, HUGE], "group_list": [3]}, {}, [[3, 0, HUGE]]),
    ({"x": [0, BIG], "dy": [0, BIG], "group_list": [1]}, {}, None),  # a [1, 2^40, 2^40] gradient
]

VALID = valid(OP)
INVALID = invalid(OP)
