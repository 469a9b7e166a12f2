"""LightningIndexer's cases; the family's geometry, selection check and invalid calls, which
LightningIndexerGrad's cases share."""

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from cases import HUGE, Fault, Scratch, raw_outputs
from fuzzing import FLOATS, INT32_EXTREMES, INT64_EXTREMES, Invalid, Valid, close, extent, rngs
from oracles import (
    BF16,
    F32,
    TOL,
    _lightning_tokens,
    assert_close,
    lightning_indexer_grad_inputs,
    lightning_indexer_oracle,
)

FORWARD_INPUTS = ("query", "key", "weights", "actual_seq_lengths_query", "actual_seq_lengths_key")


def forward(grad_inputs):
    """LightningIndexer's inputs among those of a LightningIndexerGrad call."""
    return {name: a for name, a in grad_inputs.items() if name in FORWARD_INPUTS}


def small_grad(t):
    """A small LightningIndexerGrad call the aclnn backend takes too: head dim 128 alone."""
    rng = np.random.default_rng(0)
    return lightning_indexer_grad_inputs(rng, "BSND", 3, t, np.int32, n1=4, d=128, skip_fraction=0)


def small(t):
    return forward(small_grad(t)), {"sparse_count": 4}


def variants(rng):
    tnd = lightning_indexer_grad_inputs(rng, "TND", 3, F32, np.int32, lengths_dtype=np.int32)
    bsnd = lightning_indexer_grad_inputs(rng, "BSND", 0, BF16, np.int64)
    return [
        (forward(tnd), {"layout": "TND", "sparse_count": 3}),
        (forward(bsnd), {"sparse_mode": 0, "sparse_count": 12}),
    ]


def resources_grad():
    """The LightningIndexerGrad call of the resource test, whose inputs the forward's share."""
    rng = np.random.default_rng(3)
    return lightning_indexer_grad_inputs(rng, "TND", 0, F32, np.int32, n1=2, d=16, k=3)


def resources():
    valid = forward(resources_grad())
    failing = valid | {"actual_seq_lengths_key": np.array([4, 8], np.int64)}
    return valid, failing, {"layout": "TND", "sparse_mode": 0, "sparse_count": 3}


def concurrency_grad():
    """The LightningIndexerGrad call of the concurrency test, whose inputs the forward's share."""
    rng = np.random.default_rng(7)
    return lightning_indexer_grad_inputs(
        rng, "TND", 3, BF16, np.int64, lengths_q=(40, 96), lengths_k=(300, 700), n1=8, d=64, k=32
    )


def concurrency():
    return forward(concurrency_grad()), {"layout": "TND", "sparse_mode": 3, "sparse_count": 32}


EMPTY_BUT_VAST = [
    (
        {"query": [HUGE, 0, 2, 4], "key": [HUGE, 0, 1, 4], "weights": [HUGE, 0, 2]},
        {"layout": "BSND", "sparse_count": 3},
        [[HUGE, 0, 3], [HUGE, 0, 3]],
    ),
    # Heads or head dims of 0 leave the token and key counts unbounded by memory: refused.
    ({"query": [1, HUGE, 0, 4], "key": [1, HUGE, 1, 0], "weights": [1, HUGE, 0]}, {"sparse_count": 1}, None),
    # Outputs that would not fit: ORT's allocation error, reported for the op.
    (
        {"query": [1, 1, 1, 4], "key": [1, 2, 1, 4], "weights": [1, 1, 1]},
        {"sparse_count": 2**62},
        None,
    ),
]


def lengths_of_other_ranks(inputs, attrs, outputs):
    """Refused calls whose TND lengths are not 1-D: ONNX Runtime infers the portable function's
    shapes before any of its checks runs, so these must reach the check, not fail inference."""
    key = "actual_seq_lengths_key"
    return {
        "lengths of rank 2": (inputs | {key: inputs[key][None]}, attrs, outputs, key),
        "lengths of rank 0": (inputs | {key: inputs[key][-1:].reshape(())}, attrs, outputs, key),
    }


def refused(rng):
    tnd = forward(lightning_indexer_grad_inputs(rng, "TND", 0, F32, np.int32, lengths_dtype=np.int32))
    return lengths_of_other_ranks(tnd, {"layout": "TND", "sparse_count": 3}, raw_outputs("LightningIndexer"))


def fault(rng):
    # Two tokens over 4M keys, keeping 2M: each task's candidates (2 x K at most) take 32 MiB.
    s2, k = 1 << 22, 1 << 21
    failing = {
        "query": rng.standard_normal((1, 2, 1, 1), dtype=np.float32),
        "key": rng.standard_normal((1, s2, 1, 1), dtype=np.float32),
        "weights": rng.standard_normal((1, 2, 1), dtype=np.float32),
    }
    attrs = {"layout": "BSND", "sparse_mode": 0, "sparse_count": k}
    # One token (its outputs are K wide too).
    valid = forward(lightning_indexer_grad_inputs(rng, "BSND", 0, F32, np.int32, batch=1, s1=1))

    def check(results):
        indices, values = results
        ref_indices, ref_values = lightning_indexer_oracle(**valid, **attrs)
        np.testing.assert_array_equal(indices, ref_indices)
        assert_close(values, ref_values, TOL[F32])

    return Fault(attrs, failing, 2 * k * 8, valid, check)


def many_keys(rng, tokens, s2, n1, k, checked):
    """`checked`: the first tokens compared with the oracle (scoring every key in float64 is the
    slow part)."""
    # Integers small enough that every sum stays below 2^24, so that float32 scores are exact and
    # the ranking (ties to the lower key) is the oracle's to the last place.
    reach = min(1000, 2**24 // (16 * n1))
    inputs = {
        "query": rng.integers(-4, 5, (1, tokens, n1, 1)).astype(np.float32),
        "key": rng.integers(-reach, reach + 1, (1, s2, 1, 1)).astype(np.float32),
        "weights": rng.integers(0, 5, (1, tokens, n1)).astype(np.float32),
    }

    def check(outputs):
        indices, values = outputs
        q, key, w = (inputs[n].astype(np.float64) for n in ("query", "key", "weights"))
        columns = max(1, (1 << 22) // n1)  # keys per block of the float64 scores
        for t in range(checked):
            scores = np.concatenate(
                [
                    w[0, t] @ np.maximum(q[0, t] @ key[0, c : c + columns, 0].T, 0)
                    for c in range(0, s2, columns)
                ]
            )
            # The k best by (score descending, key ascending), among the keys at or above the k-th
            # score: the same as sorting all of them.
            candidates = np.nonzero(scores >= np.partition(scores, s2 - k)[s2 - k])[0]
            best = candidates[np.lexsort((candidates, -scores[candidates]))][:k]
            np.testing.assert_array_equal(indices[0, t], best)
            np.testing.assert_array_equal(values[0, t], scores[best])

    return Scratch({"layout": "BSND", "sparse_mode": 0, "sparse_count": k}, inputs, check)


SCRATCH = {
    # 64 heads over 4M keys: the scores of all keys were 1 GiB per token.
    "indexer_many_keys": lambda rng: many_keys(rng, 2, 1 << 22, 64, 2048, checked=1),
    # 16,384 heads over 8K keys: 512 MiB of scores per token.
    "indexer_many_heads": lambda rng: many_keys(rng, 2, 1 << 13, 16384, 2048, checked=2),
}


@st.composite
def geometry(draw):
    """Keyword arguments of lightning_indexer_grad_inputs: layout, sparse mode and batch shapes,
    TND batches of random lengths (empty ones included)."""
    layout = draw(st.sampled_from(["BSND", "TND"]))
    sizes = {
        "layout": layout,
        "sparse_mode": draw(st.sampled_from([0, 3])),
        "n1": draw(st.integers(1, 4)),
        "d": draw(st.one_of(st.integers(1, 8), st.integers(9, 40))),
        "k": draw(st.one_of(st.integers(1, 4), st.integers(5, 12))),
    }
    if layout == "BSND":
        sizes |= {"batch": draw(extent(3)), "s1": draw(extent(6)), "s2": draw(extent(9))}
    else:
        batches = draw(st.integers(1, 3))
        sizes["lengths_q"] = tuple(np.cumsum([draw(extent(6)) for _ in range(batches)]))
        sizes["lengths_k"] = tuple(np.cumsum([draw(extent(9)) for _ in range(batches)]))
        sizes["lengths_dtype"] = draw(st.sampled_from([np.int32, np.int64]))
    return sizes


def token_view(inputs, layout):
    """The oracles' per-token view (float64 query, key and weights rows; per token its position,
    S1_b, S2_b and first key row) of LightningIndexer inputs."""
    lengths = {k: v for k, v in inputs.items() if k.startswith("actual_seq_lengths")}
    return _lightning_tokens(layout, inputs["query"], inputs["key"], inputs["weights"], **lengths)


@st.composite
def valid(draw):
    sizes = draw(geometry())
    layout, mode, count = sizes.pop("layout"), sizes.pop("sparse_mode"), sizes.pop("k")
    t = draw(st.sampled_from(FLOATS))
    rng = draw(rngs())
    inputs = forward(lightning_indexer_grad_inputs(rng, layout, mode, t, np.int32, k=1, **sizes))
    attrs = {"layout": layout, "sparse_mode": mode, "sparse_count": count}

    def check(outputs):
        indices, values = outputs
        assert (indices.dtype, values.dtype) == (np.int32, t)
        assert indices.shape == values.shape == (*inputs["query"].shape[:-2], count)
        check_selection(inputs, layout, mode, indices.reshape(-1, count), values.reshape(-1, count), t)

    return Valid("LightningIndexer", inputs, attrs, None, check, draw(st.sampled_from([1, 2])))


def check_selection(inputs, layout, mode, indices, values, t):
    """Each token's slots hold distinct allowed keys whose float64 scores are the top ones (up to
    rounding: near-ties may swap), then -1 with value 0; values are those scores."""
    q, k, w, tokens = token_view(inputs, layout)
    picked_ref = np.zeros(values.shape)
    for row, (s, s1, s2, first) in enumerate(tokens):
        allowed = s2 if mode == 0 else max(0, min(s2, s2 - s1 + s + 1))
        scores = np.maximum(q[row] @ k[first : first + allowed].T, 0).T @ w[row]
        bound = np.abs(np.maximum(np.abs(q[row]) @ np.abs(k[first : first + allowed]).T, 0)).T @ np.abs(
            w[row]
        )
        taken = min(allowed, indices.shape[1])
        chosen = indices[row, :taken]
        assert np.all(indices[row, taken:] == -1) and np.all(values[row, taken:] == 0)
        assert np.all((chosen >= 0) & (chosen < allowed)) and len(set(chosen.tolist())) == taken
        best = np.sort(scores)[::-1][:taken]
        slack = 1e-5 * (bound.max() if allowed else 0)
        assert np.all(np.abs(np.sort(scores[chosen])[::-1] - best) <= slack)
        picked_ref[row, :taken] = scores[chosen]
    close(values, picked_ref, TOL[t])


@st.composite
def invalid(draw, op="LightningIndexer"):
    sizes = draw(geometry())
    layout, mode, count = sizes.pop("layout"), sizes.pop("sparse_mode"), sizes.pop("k")
    grad = op == "LightningIndexerGrad"
    rng = draw(rngs())
    rules = ["layout", "sparse_mode", "query rank", "key heads", "head dim", "weights", "lengths", "heads 0"]
    rules += ["dim 0", "lengths type"]
    rules += (
        ["head_num", "dy", "indices shape", "indices type", "hostile index"] if grad else ["sparse_count"]
    )
    rule = draw(st.sampled_from(rules))
    if rule == "lengths":
        layout = draw(st.sampled_from(["BSND", "TND"]))
        if layout == "TND":
            sizes = {k: v for k, v in sizes.items() if k not in ("batch", "s1", "s2")}
            sizes.setdefault("lengths_q", (3, 7))
            sizes.setdefault("lengths_k", (4, 9))
        else:
            sizes = {k: v for k, v in sizes.items() if not k.startswith("lengths")}
    if rule == "hostile index":
        mode = 0  # every slot counts
        sizes["batch"] = sizes["s1"] = sizes["s2"] = 1
        if layout == "TND":
            sizes["lengths_q"] = sizes["lengths_k"] = (1,)
    inputs = lightning_indexer_grad_inputs(rng, layout, mode, F32, np.int32, k=count, **sizes)
    attrs = {"layout": layout, "sparse_mode": mode}
    attrs |= {"head_num": inputs["query"].shape[-2]} if grad else {"sparse_count": count}
    names = None
    q_axes = inputs["query"].ndim
    if rule == "layout":
        attrs["layout"], names = draw(st.sampled_from(["NSD", "bsnd", "", "TND\0"])), "layout"
    elif rule == "sparse_mode":
        attrs["sparse_mode"], names = draw(st.sampled_from([1, 2, 4, -1, *INT64_EXTREMES])), "sparse_mode"
    elif rule == "sparse_count":
        attrs["sparse_count"], names = draw(st.sampled_from([0, -1, np.iinfo(np.int64).min])), "sparse_count"
    elif rule == "query rank":
        inputs["query"], names = inputs["query"][..., None], "query"
    elif rule == "key heads":
        inputs["key"], names = np.concatenate([inputs["key"]] * 2, axis=-2), "key"
    elif rule == "head dim":
        inputs["key"], names = np.concatenate([inputs["key"]] * 2, axis=-1), "key"
        assume(inputs["key"].shape[-1] != inputs["query"].shape[-1])
    elif rule == "weights":
        inputs["weights"], names = np.concatenate([inputs["weights"]] * 2, axis=-1), "weights"
    elif rule in ("heads 0", "dim 0"):
        axis = q_axes - (2 if rule == "heads 0" else 1)
        inputs["query"] = np.take(inputs["query"], [], axis=axis)
        if rule == "heads 0":
            inputs["weights"] = np.take(inputs["weights"], [], axis=-1)
            attrs.pop("head_num", None)
            attrs |= {"head_num": 1} if grad else {}
            names = "query"
        else:
            inputs["key"], names = np.take(inputs["key"], [], axis=-1), "query"
    elif rule == "lengths":
        names = "actual_seq_lengths"
        if layout == "BSND":
            inputs["actual_seq_lengths_query"] = np.array([inputs["query"].shape[1]], np.int64)
        else:
            name = draw(st.sampled_from(["actual_seq_lengths_query", "actual_seq_lengths_key"]))
            lengths = inputs[name].astype(np.int64)
            broken = draw(
                st.sampled_from(
                    ["missing", "decreasing", "negative", "short", "long", "count", "rank", "scalar"]
                )
            )
            if broken == "missing":
                del inputs[name]
            elif broken == "decreasing":
                inputs[name] = np.array([lengths[-1] + 1, lengths[-1]], np.int64)
            elif broken == "negative":
                inputs[name] = np.array([-1, *lengths], np.int64)
            elif broken == "short":
                inputs[name] = np.array([*lengths[:-1], lengths[-1] - 1], np.int64)
            elif broken == "long":
                inputs[name] = np.array([*lengths[:-1], draw(st.sampled_from(INT64_EXTREMES[3:]))], np.int64)
            elif broken == "count":
                inputs[name] = np.array([0, *lengths], np.int64)
            elif broken == "rank":
                inputs[name] = lengths[None]
            else:
                inputs[name] = lengths[-1:].reshape(())
    elif rule == "lengths type":
        assume(layout == "TND")
        names = "actual_seq_lengths"
        inputs["actual_seq_lengths_key"] = inputs["actual_seq_lengths_key"].astype(np.float32)
    elif rule == "head_num":
        attrs["head_num"] = draw(st.sampled_from([0, -1, attrs["head_num"] + 1, *INT64_EXTREMES, None]))
        if attrs["head_num"] is None:
            del attrs["head_num"]
        names = "head_num"
    elif rule == "dy":
        # K is read from dy, so the indices are the input reported as not matching.
        inputs["dy"], names = np.concatenate([inputs["dy"]] * 2, axis=-1), "sparse_indices"
    elif rule == "indices shape":
        inputs["sparse_indices"], names = inputs["sparse_indices"][..., :-1], "sparse_indices"
    elif rule == "indices type":
        inputs["sparse_indices"], names = inputs["sparse_indices"].astype(np.float32), "sparse_indices"
    elif rule == "hostile index":
        index_type = draw(st.sampled_from([np.int32, np.int64]))
        bad = draw(st.sampled_from([1, 2, *(INT32_EXTREMES if index_type == np.int32 else INT64_EXTREMES)]))
        indices = inputs["sparse_indices"].astype(index_type)
        indices.reshape(-1, count)[0, draw(st.integers(0, count - 1))] = bad
        inputs["sparse_indices"], names = indices, "sparse_indices"
    if not grad:
        inputs = {name: a for name, a in inputs.items() if name not in ("dy", "sparse_indices")}
    ordered = [
        "query",
        "key",
        "dy",
        "sparse_indices",
        "weights",
        "actual_seq_lengths_query",
        "actual_seq_lengths_key",
    ]
    inputs = {name: inputs[name] for name in ordered if name in inputs}
    return Invalid(op, inputs, attrs, raw_outputs(op), names)


VALID = valid()
INVALID = invalid("LightningIndexer")
