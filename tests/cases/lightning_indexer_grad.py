"""LightningIndexerGrad's cases."""

import numpy as np
from hypothesis import strategies as st

from cases import HUGE, Fault, Scratch
from cases.lightning_indexer import (
    concurrency_grad,
    geometry,
    invalid,
    lengths_of_other_ranks,
    resources_grad,
    small_grad,
)
from fuzzing import FLOATS, Valid, close, rngs
from oracles import BF16, F32, TOL, assert_close, lightning_indexer_grad_inputs, lightning_indexer_grad_oracle


def small(t):
    return small_grad(t), {"head_num": 4}


def variants(rng):
    tnd = lightning_indexer_grad_inputs(rng, "TND", 3, F32, np.int32, lengths_dtype=np.int32)
    bsnd = lightning_indexer_grad_inputs(rng, "BSND", 0, BF16, np.int64)
    return [(tnd, {"head_num": 3, "layout": "TND"}), (bsnd, {"head_num": 3, "sparse_mode": 0})]


def resources():
    valid = resources_grad()
    hostile = valid["sparse_indices"].copy()
    hostile[-1, -1] = 2**31 - 1
    return valid, valid | {"sparse_indices": hostile}, {"head_num": 2, "layout": "TND", "sparse_mode": 0}


def concurrency():
    return concurrency_grad(), {"head_num": 8, "layout": "TND", "sparse_mode": 3}


EMPTY_BUT_VAST = [
    (
        {
            "query": [HUGE, 0, 2, 4],
            "key": [HUGE, 0, 1, 4],
            "dy": [HUGE, 0, 3],
            "sparse_indices": [HUGE, 0, 3],
            "weights": [HUGE, 0, 2],
        },
        {"head_num": 2},
        [[HUGE, 0, 2, 4], [HUGE, 0, 1, 4], [HUGE, 0, 2]],
    ),
    # Heads of 0 leave the token count unbounded by memory: refused.
    (
        {
            "query": [1, HUGE, 0, 4],
            "key": [1, 4, 1, 4],
            "dy": [1, HUGE, 0],
            "sparse_indices": [1, HUGE, 0],
            "weights": [1, HUGE, 0],
        },
        {"head_num": 1},
        None,
    ),
]


def fault(rng):
    # Two tokens with a 4M head dim over two key rows: each task gathers (and sums d_key for) one
    # 16 MiB key row at a time.
    d = 1 << 22
    failing = {
        "query": rng.standard_normal((1, 2, 1, d), dtype=np.float32),
        "key": rng.standard_normal((1, 2, 1, d), dtype=np.float32),
        "dy": rng.standard_normal((1, 2, 4), dtype=np.float32),
        "sparse_indices": np.array([[[0, 1, -1, 1], [1, 0, 0, -1]]], np.int32),
        "weights": rng.standard_normal((1, 2, 1), dtype=np.float32),
    }
    valid = lightning_indexer_grad_inputs(rng, "BSND", 0, F32, np.int32, n1=1)

    def check(results):
        refs = lightning_indexer_grad_oracle(**valid, layout="BSND", sparse_mode=0)
        for out, ref in zip(results, refs, strict=True):
            assert_close(out, ref, TOL[F32])

    attrs = {"head_num": 1, "layout": "BSND", "sparse_mode": 0}
    return Fault(attrs, failing, 2 * (2 * d + 1) * 4, valid, check)


def many_rows(rng, tokens, s2, n1, d, k):
    inputs = {
        "query": rng.standard_normal((1, tokens, n1, d), dtype=np.float32),
        "key": rng.standard_normal((1, s2, 1, d), dtype=np.float32),
        "dy": rng.standard_normal((1, tokens, k), dtype=np.float32),
        "sparse_indices": rng.integers(0, s2, (1, tokens, k), dtype=np.int32),
        "weights": rng.standard_normal((1, tokens, n1), dtype=np.float32),
    }

    def check(outputs):
        refs = lightning_indexer_grad_oracle(**inputs, layout="BSND", sparse_mode=0)
        for out, ref in zip(outputs, refs, strict=True):
            assert_close(out, ref, TOL[F32])

    return Scratch({"head_num": n1, "layout": "BSND", "sparse_mode": 0}, inputs, check)


SCRATCH = {
    # 8,192 tokens of one slot over 10M key rows: a strips-sized array per token was 2.5 GiB.
    "indexer_grad_many_keys": lambda rng: many_rows(rng, 8192, 10_000_000, 1, 1, 1),
    # 2,048 slots of D = 32K over four key rows: a gathered panel of K x D was 256 MiB per token.
    "indexer_grad_wide": lambda rng: many_rows(rng, 2, 4, 1, 1 << 15, 1 << 11),
}


@st.composite
def valid(draw):
    sizes = draw(geometry())
    layout, mode = sizes.pop("layout"), sizes.pop("sparse_mode")
    t = draw(st.sampled_from(FLOATS))
    index_type = draw(st.sampled_from([np.int32, np.int64]))
    rng = draw(rngs())
    skip = draw(st.sampled_from([0.0, 0.2, 1.0]))
    inputs = lightning_indexer_grad_inputs(rng, layout, mode, t, index_type, skip_fraction=skip, **sizes)
    attrs = {"head_num": sizes["n1"], "layout": layout, "sparse_mode": mode}
    attrs |= draw(st.sampled_from([{}, {"deterministic": 1}, {"pre_tokens": 65536, "next_tokens": 0}]))

    def check(outputs):
        refs = lightning_indexer_grad_oracle(**inputs, layout=layout, sparse_mode=mode)
        for out, ref in zip(outputs, refs, strict=True):
            close(out, ref, TOL[t])
            assert out.dtype == t

    return Valid("LightningIndexerGrad", inputs, attrs, None, check, draw(st.sampled_from([1, 2])))


def refused(rng):
    tnd = lightning_indexer_grad_inputs(rng, "TND", 0, F32, np.int64, skip_fraction=0.0)
    bsnd = lightning_indexer_grad_inputs(rng, "BSND", 0, F32, np.int32, skip_fraction=0.0)

    def index_at(inputs, value, token=0, slot=0):
        indices = inputs["sparse_indices"].copy()
        indices.reshape(-1, indices.shape[-1])[token, slot] = value
        return inputs | {"sparse_indices": indices}

    s2 = bsnd["key"].shape[1]
    first_batch_keys = int(tnd["actual_seq_lengths_key"][0])
    outputs = {"d_query": F32, "d_key": F32, "d_weights": F32}
    tnd_attrs = {"head_num": 3, "layout": "TND", "sparse_mode": 0}
    bsnd_attrs = {"head_num": 3, "sparse_mode": 0}
    lengths = "actual_seq_lengths_query"
    return {
        "index S2 (the next batch's row)": (index_at(bsnd, s2), bsnd_attrs, outputs, "sparse_indices"),
        "index -2": (index_at(bsnd, -2), bsnd_attrs, outputs, "sparse_indices"),
        "index -7": (index_at(bsnd, -7), bsnd_attrs, outputs, "sparse_indices"),
        "TND index into the next batch": (
            index_at(tnd, first_batch_keys),
            tnd_attrs,
            outputs,
            "sparse_indices",
        ),
        "decreasing lengths": (tnd | {lengths: tnd[lengths][::-1].copy()}, tnd_attrs, outputs, lengths),
        "negative length": (tnd | {lengths: np.array([-1, 7], np.int64)}, tnd_attrs, outputs, lengths),
        "lengths past the tokens": (tnd | {lengths: np.array([3, 8], np.int64)}, tnd_attrs, outputs, lengths),
        "lengths short of the tokens": (
            tnd | {lengths: np.array([3, 6], np.int64)},
            tnd_attrs,
            outputs,
            lengths,
        ),
        "one length too many": (
            tnd | {lengths: np.array([3, 5, 7], np.int64)},
            tnd_attrs,
            outputs,
            "per batch",
        ),
        "head_num": (bsnd, bsnd_attrs | {"head_num": 4}, outputs, "head_num"),
        "sparse_mode": (bsnd, bsnd_attrs | {"sparse_mode": 1}, outputs, "sparse_mode"),
        "layout": (bsnd, bsnd_attrs | {"layout": "BNSD"}, outputs, "layout"),
    } | lengths_of_other_ranks(tnd, tnd_attrs, outputs)


VALID = valid()
INVALID = invalid("LightningIndexerGrad")
