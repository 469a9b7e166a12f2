"""FlashAttentionScoreGrad's cases."""

import numpy as np
from hypothesis import strategies as st

from cases import HUGE
from cases.flash_attention_score import (
    GRAD_INPUTS,
    concurrency_call,
    geometry,
    invalid,
    long_call,
    refused_calls,
    resources_call,
    slotted,
    small_call,
    variant_calls,
)
from fuzzing import FLOATS, Valid, close, rngs
from oracles import TOL, flash_attention_grad_oracle, flash_attention_inputs


def small(t):
    return small_call(t, grad=True)


def variants(rng):
    return variant_calls(rng, grad=True)


def refused(rng):
    return refused_calls(rng, grad=True)


def resources():
    return resources_call(grad=True)


def concurrency():
    return concurrency_call(grad=True)


SCRATCH = {"attention_long": lambda rng: long_call(rng, grad=True)}


EMPTY_BUT_VAST = [
    (
        {
            "query": [HUGE, 0, 1, 4],
            "key": [HUGE, 0, 1, 4],
            "value": [HUGE, 0, 1, 8],
            "dy": [HUGE, 0, 1, 8],
            "atten_mask": None,
            "softmax_max": [HUGE, 1, 0, 8],
            "softmax_sum": [HUGE, 1, 0, 8],
            "attention_in": [HUGE, 0, 1, 8],
        },
        {"head_num": 1},
        [[HUGE, 0, 1, 4], [HUGE, 0, 1, 4], [HUGE, 0, 1, 8]],
    ),
    # Heads of 0 leave the rows and keys unbounded by memory: refused.
    (
        {
            "query": [1, HUGE, 0, 4],
            "key": [1, HUGE, 0, 4],
            "value": [1, HUGE, 0, 4],
            "dy": [1, HUGE, 0, 4],
            "atten_mask": None,
            "softmax_max": [1, 0, HUGE, 8],
            "softmax_sum": [1, 0, HUGE, 8],
            "attention_in": [1, HUGE, 0, 4],
        },
        {"head_num": 1},
        None,
    ),
]


def magnitude(inputs, attrs):
    """A per-element size of the gradients' terms: where the exact gradient cancels to 0 (a
    single key, say), rounding leaves residues of this order, which no relative test accepts."""
    peak = {name: float(np.abs(inputs[name].astype(np.float64)).max(initial=0)) for name in GRAD_INPUTS[:4]}
    return peak["dy"] * peak["value"] * max(1.0, abs(attrs["scale_value"]) * peak["query"] * peak["key"])


@st.composite
def valid(draw):
    layout, sizes = draw(geometry())
    t = draw(st.sampled_from(FLOATS))
    inputs, attrs = flash_attention_inputs(draw(rngs()), layout, t, grad=True, **sizes)

    def check(outputs):
        refs = flash_attention_grad_oracle(**inputs, **attrs)
        floor = magnitude(inputs, attrs)
        for out, ref in zip(outputs, refs, strict=True):
            assert out.dtype == t
            close(out, ref, TOL[t], scale=np.abs(ref) + floor)

    feeds = slotted(inputs, GRAD_INPUTS)
    return Valid("FlashAttentionScoreGrad", feeds, attrs, None, check, draw(st.sampled_from([1, 2])))


VALID = valid()
INVALID = invalid("FlashAttentionScoreGrad")
