"""FlashAttentionScore's cases; the family's geometry, checks and invalid calls, which
FlashAttentionScoreGrad's cases share."""

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from cases import HUGE, Scratch, raw_outputs
from fuzzing import FLOATS, INT64_EXTREMES, Invalid, Valid, close, extent, rngs
from oracles import (
    BF16,
    F16,
    F32,
    TOL,
    assert_close,
    flash_attention_grad_oracle,
    flash_attention_inputs,
    flash_attention_oracle,
)

FORWARD_INPUTS = (
    "query",
    "key",
    "value",
    "atten_mask",
    "actual_seq_lengths_query",
    "actual_seq_lengths_kv",
)
GRAD_INPUTS = (
    "query",
    "key",
    "value",
    "dy",
    "atten_mask",
    "softmax_max",
    "softmax_sum",
    "attention_in",
    "actual_seq_lengths_query",
    "actual_seq_lengths_kv",
)


def slotted(inputs, order):
    """inputs in the op's slot order, an absent optional input before a present one as None (an
    empty slot, as harness.raw_model takes it)."""
    last = max(order.index(name) for name in inputs)
    return {name: inputs.get(name) for name in order[: last + 1]}


def small_call(t, grad=False):
    """A call every engine takes, the aclnn backend's default product too (D = 64), with every
    defaulted attribute at its default (BSND among them)."""
    rng = np.random.default_rng(0)
    inputs, attrs = flash_attention_inputs(rng, "BSND", t, batch=1, s1=8, s2=8, d=64, grad=grad)
    del attrs["scale_value"], attrs["input_layout"]
    return inputs, attrs


def small(t):
    return small_call(t)


def variant_calls(rng, grad=False):
    """A call of each kind: layouts, sparse modes, masks of both types, GQA, Dv != D, TND with
    int32 lengths."""
    specs = [
        ("BSND", F32, {}),
        ("BNSD", BF16, {"mask": "bn", "mask_dtype": np.uint8, "pre_tokens": 2, "next_tokens": 1}),
        ("BSH", F32, {"mask": "2d", "n2": 1, "dv": 4}),
        ("SBH", F16, {"sparse_mode": 2, "n2": 4}),
        ("TND", F32, {"sparse_mode": 3, "lengths_dtype": np.int32, "dv": 16}),
        ("BSND", F32, {"mask": "b1", "s1": 9, "s2": 4}),
    ]
    return [flash_attention_inputs(rng, layout, t, grad=grad, **kw) for layout, t, kw in specs]


def variants(rng):
    return variant_calls(rng)


def refused_calls(rng, grad=False):
    """Named calls the contract refuses, one rule broken each."""
    op = "FlashAttentionScoreGrad" if grad else "FlashAttentionScore"
    order = GRAD_INPUTS if grad else FORWARD_INPUTS
    outputs = raw_outputs(op)
    bsnd, attrs = flash_attention_inputs(rng, "BSND", F32, grad=grad)
    masked, mask_attrs = flash_attention_inputs(rng, "BSND", F32, mask="2d", grad=grad)
    tnd, tnd_attrs = flash_attention_inputs(rng, "TND", F32, grad=grad)
    lengths = "actual_seq_lengths_query"

    def call(inputs, attrs, word):
        return (slotted(inputs, order), attrs, outputs, word)

    return {
        "sparse_mode 1": call(bsnd, attrs | {"sparse_mode": 1}, "sparse_mode"),
        "layout": call(bsnd, attrs | {"input_layout": "NSD"}, "input_layout"),
        "keep_prob": call(bsnd, attrs | {"keep_prob": 0.9}, "keep_prob"),
        "head_num": call(bsnd, attrs | {"head_num": 3}, "head_num"),
        "mask with sparse_mode 3": call(masked, mask_attrs | {"sparse_mode": 3}, "atten_mask"),
        "mask of the wrong shape": call(
            masked | {"atten_mask": masked["atten_mask"][:, :-1]}, mask_attrs, "atten_mask"
        ),
        "lengths in BSND": call(bsnd | {lengths: np.array([5, 10])}, attrs, lengths),
        "TND without lengths": call({k: v for k, v in tnd.items() if k != lengths}, tnd_attrs, lengths),
        "decreasing lengths": call(tnd | {lengths: tnd[lengths][::-1].copy()}, tnd_attrs, lengths),
        "lengths past the tokens": call(tnd | {lengths: np.array([3, 8])}, tnd_attrs, lengths),
        "lengths of rank 2": call(tnd | {lengths: tnd[lengths][None]}, tnd_attrs, lengths),
        "key heads": call(bsnd | {"key": np.concatenate([bsnd["key"]] * 2, axis=1)}, attrs, "key"),
    }


def refused(rng):
    return refused_calls(rng)


def resources_call(grad=False):
    """(valid, failing, attrs) of one dynamic-shape TND model: the failing lengths end past T2."""
    rng = np.random.default_rng(3)
    valid, attrs = flash_attention_inputs(rng, "TND", F32, n1=2, n2=1, d=16, grad=grad)
    failing = valid | {"actual_seq_lengths_kv": np.array([4, 10], np.int64)}
    return valid, failing, attrs


def resources():
    return resources_call()


def concurrency_call(grad=False):
    rng = np.random.default_rng(7)
    return flash_attention_inputs(
        rng, "BNSD", BF16, batch=2, n1=8, n2=2, s1=200, s2=300, d=64, sparse_mode=3, grad=grad
    )


def concurrency():
    return concurrency_call()


EMPTY_BUT_VAST = [
    # One head: ONNX Runtime sizes the statistics [B, N1, S1, 8] left to right, so B * N1 must not
    # overflow before S1 = 0 is reached.
    (
        {"query": [HUGE, 0, 1, 4], "key": [HUGE, 0, 1, 4], "value": [HUGE, 0, 1, 8]},
        {"head_num": 1},
        [[HUGE, 0, 1, 8], [HUGE, 1, 0, 8], [HUGE, 1, 0, 8]],
    ),
    # Heads or head dims of 0 leave the rows and keys unbounded by memory: refused.
    ({"query": [1, HUGE, 0, 4], "key": [1, HUGE, 0, 4], "value": [1, HUGE, 0, 4]}, {"head_num": 1}, None),
    ({"query": [1, HUGE, 1, 0], "key": [1, HUGE, 1, 0], "value": [1, HUGE, 1, 0]}, {"head_num": 1}, None),
]


@st.composite
def geometry(draw):
    """Keyword arguments of flash_attention_inputs (besides rng and dtype), layout and attributes
    included: empty extents, GQA groups, Dv != D, masks and bands, ragged TND batches."""
    layout = draw(st.sampled_from(["BSND", "BNSD", "BSH", "SBH", "TND"]))
    n2 = draw(st.integers(1, 3))
    sizes = {
        "n2": n2,
        "n1": n2 * draw(st.integers(1, 3)),
        "d": draw(st.one_of(st.integers(1, 8), st.integers(9, 40))),
        "dv": draw(st.one_of(st.integers(1, 8), st.integers(9, 40))),
        "sparse_mode": draw(st.sampled_from([0, 2, 3])),
        "scale_value": draw(st.sampled_from([1.0, 0.125, -0.5])),
    }
    if layout == "TND":
        batches = draw(st.integers(1, 3))
        sizes["lengths_q"] = tuple(int(e) for e in np.cumsum([draw(extent(9)) for _ in range(batches)]))
        sizes["lengths_kv"] = tuple(int(e) for e in np.cumsum([draw(extent(9)) for _ in range(batches)]))
        sizes["lengths_dtype"] = draw(st.sampled_from([np.int32, np.int64]))
    else:
        sizes |= {"batch": draw(extent(3)), "s1": draw(extent(9)), "s2": draw(extent(9))}
        if sizes["sparse_mode"] == 0:
            sizes["mask"] = draw(st.sampled_from([None, "2d", "b1", "bn"]))
        if sizes.get("mask"):
            sizes["mask_dtype"] = draw(st.sampled_from([np.bool_, np.uint8]))
            sizes["pre_tokens"] = draw(st.sampled_from([2**31 - 1, 0, 2, -1]))
            sizes["next_tokens"] = draw(st.sampled_from([2**31 - 1, 0, 3, -2]))
    return layout, sizes


def check_stats(out, ref):
    """Statistics: -inf (rows with no key) exactly where the oracle has it, the rest close."""
    assert out.dtype == F32 and out.shape == ref.shape, (out.dtype, out.shape, ref.shape)
    finite = np.isfinite(ref)
    np.testing.assert_array_equal(np.isfinite(out), finite)
    np.testing.assert_array_equal(out[~finite], ref[~finite])
    close(np.where(finite, out, 0), np.where(finite, ref, 0), TOL[F32])


@st.composite
def valid(draw):
    layout, sizes = draw(geometry())
    t = draw(st.sampled_from(FLOATS))
    inputs, attrs = flash_attention_inputs(draw(rngs()), layout, t, **sizes)

    def check(outputs):
        out, row_max, row_sum = outputs
        ref_out, ref_max, ref_sum = flash_attention_oracle(**inputs, **attrs)
        assert out.dtype == t
        close(out, ref_out, TOL[t])
        check_stats(row_max, ref_max)
        check_stats(row_sum, ref_sum)

    feeds = slotted(inputs, FORWARD_INPUTS)
    return Valid("FlashAttentionScore", feeds, attrs, None, check, draw(st.sampled_from([1, 2])))


@st.composite
def invalid(draw, op="FlashAttentionScore"):
    grad = op == "FlashAttentionScoreGrad"
    layout, sizes = draw(geometry())
    rules = ["layout", "sparse_mode", "keep_prob", "head_num", "query rank", "key heads", "head dim"]
    rules += ["value rows", "heads 0", "dim 0", "mask", "lengths", "lengths type"]
    rules += ["dy", "stats", "attention_in"] if grad else []
    rule = draw(st.sampled_from(rules))
    if rule in ("mask", "lengths", "lengths type"):
        layout, sizes = draw(geometry().filter(lambda g: (g[0] == "TND") == (rule == "lengths type")))
    if rule == "key heads":
        sizes["n2"] = sizes["n1"]
    if rule == "mask":
        sizes["mask"] = sizes.get("mask") or "2d"
    sizes["sparse_mode"] = 0 if rule == "mask" else sizes["sparse_mode"]
    # Non-empty extents: a rule about a tensor's geometry holds for empty tensors too, but the
    # chosen breakage must stay visible (concatenating an empty axis changes nothing).
    for name in ("batch", "s1", "s2"):
        if name in sizes:
            sizes[name] = max(sizes[name], 1)
    if "lengths_q" in sizes:
        sizes["lengths_q"] = tuple(e + i + 1 for i, e in enumerate(sizes["lengths_q"]))
        sizes["lengths_kv"] = tuple(e + i + 1 for i, e in enumerate(sizes["lengths_kv"]))
    inputs, attrs = flash_attention_inputs(draw(rngs()), layout, F32, grad=grad, **sizes)
    hidden = layout in ("BSH", "SBH")
    names = None
    if rule == "layout":
        attrs["input_layout"], names = draw(st.sampled_from(["NSD", "bsnd", "", "TND\0"])), "input_layout"
    elif rule == "sparse_mode":
        attrs["sparse_mode"], names = draw(st.sampled_from([1, 4, 8, -1, *INT64_EXTREMES])), "sparse_mode"
    elif rule == "keep_prob":
        attrs["keep_prob"], names = draw(st.sampled_from([0.0, 0.5, 0.9, 2.0])), "keep_prob"
    elif rule == "head_num":
        attrs["head_num"] = draw(st.sampled_from([0, -1, attrs["head_num"] + 1, *INT64_EXTREMES, None]))
        assume(not hidden or attrs["head_num"] is None or attrs["head_num"] <= 0)
        if attrs["head_num"] is None:
            del attrs["head_num"]
        names = "head_num"
    elif rule == "query rank":
        inputs["query"], names = inputs["query"][..., None], "query"
    elif rule == "key heads":
        # N2 = N1 + 1 does not divide N1 (BSH/SBH: key's hidden size is no multiple of D).
        axis = {"BNSD": 1}.get(layout, -2)
        extra = np.take(inputs["key"], [0], axis=-1 if hidden else axis)
        if hidden:
            assume(inputs["key"].shape[-1] // sizes["n1"] > 1)
        inputs["key"], names = np.concatenate([inputs["key"], extra], axis=-1 if hidden else axis), "key"
    elif rule == "head dim":
        assume(not hidden)
        inputs["key"], names = np.concatenate([inputs["key"]] * 2, axis=-1), "key"
    elif rule == "value rows":
        axis = {"BSND": 1, "BNSD": 2, "BSH": 1, "SBH": 0, "TND": 0}[layout]
        inputs["value"], names = np.concatenate([inputs["value"]] * 2, axis=axis), "value"
    elif rule in ("heads 0", "dim 0"):
        assume(not hidden)
        axis = -1 if rule == "dim 0" else (1 if layout == "BNSD" else -2)
        for name in ("query", "key", "value") if rule == "heads 0" else ("query", "key"):
            inputs[name] = np.take(inputs[name], [], axis=axis)
        attrs["head_num"] = max(attrs["head_num"], 1) if rule == "dim 0" else 1
        names = "query"
    elif rule == "mask":
        mask = inputs.get("atten_mask", np.zeros((1, 1), np.bool_))
        broken = draw(st.sampled_from(["shape", "rank", "mode", "type"]))
        if broken == "shape":
            inputs["atten_mask"] = np.concatenate([mask, mask], axis=-1)
        elif broken == "rank":
            inputs["atten_mask"] = mask[None]
        elif broken == "type":
            inputs["atten_mask"] = mask.astype(np.float32)
        else:
            inputs["atten_mask"] = np.zeros((inputs["query"].shape[0], 1), np.bool_)
            attrs["sparse_mode"] = draw(st.sampled_from([2, 3]))
        names = "atten_mask"
    elif rule == "lengths":
        inputs["actual_seq_lengths_query"], names = np.array([1], np.int64), "actual_seq_lengths"
    elif rule == "lengths type":
        names = "actual_seq_lengths"
        name = draw(st.sampled_from(["actual_seq_lengths_query", "actual_seq_lengths_kv"]))
        broken = draw(st.sampled_from(["missing", "decreasing", "negative", "short", "long", "float"]))
        lengths = inputs[name].astype(np.int64)
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
        else:
            inputs[name] = lengths.astype(np.float32)
    elif rule == "dy":
        inputs["dy"], names = np.concatenate([inputs["dy"]] * 2, axis=-1), "dy"
    elif rule == "stats":
        name = draw(st.sampled_from(["softmax_max", "softmax_sum"]))
        inputs[name], names = inputs[name][..., :4], name
    elif rule == "attention_in":
        inputs["attention_in"], names = inputs["attention_in"][..., :-1], "attention_in"
    if not grad:
        inputs = {name: a for name, a in inputs.items() if name in FORWARD_INPUTS}
    order = GRAD_INPUTS if grad else FORWARD_INPUTS
    return Invalid(op, slotted(inputs, order), attrs, raw_outputs(op), names)


VALID = valid()
INVALID = invalid("FlashAttentionScore")


# A long sequence, BNSD, two query heads over one key-value head: the whole [N1, S1, S2] scores
# in float32 would be 512 MiB against 13 MiB of tensors. Rows CHECKED (spread over the sequence)
# are held to the float64 oracle; computing it everywhere is the slow part.
LONG = {"n1": 2, "n2": 1, "s": 8192, "d": 64}
CHECKED = np.array([0, 1, 4095, 8191])


def _long_forward(q, k, v, attrs, rows):
    """The float64 forward of query ``rows`` (sparse mode 0: a row reads every key)."""
    return flash_attention_oracle(q[:, :, rows], k, v, **attrs)


def long_call(rng, grad=False):
    n1, n2, s, d = (LONG[n] for n in ("n1", "n2", "s", "d"))
    inputs = {
        "query": rng.standard_normal((1, n1, s, d), dtype=np.float32),
        "key": rng.standard_normal((1, n2, s, d), dtype=np.float32),
        "value": rng.standard_normal((1, n2, s, d), dtype=np.float32),
    }
    attrs = {"head_num": n1, "input_layout": "BNSD", "scale_value": d**-0.5}
    q, k, v = (inputs[n].astype(np.float64) for n in ("query", "key", "value"))
    if not grad:

        def check(outputs):
            for out, ref in zip(outputs, _long_forward(q, k, v, attrs, CHECKED), strict=True):
                assert_close(out[:, :, CHECKED], ref, TOL[F32])

        return Scratch(attrs, inputs, check)
    # The forward's outputs, 512 query rows at a time (their float64 scores take 64 MiB).
    blocks = [_long_forward(q, k, v, attrs, np.arange(r, r + 512)) for r in range(0, s, 512)]
    out, softmax_max, softmax_sum = (
        np.concatenate(parts, axis=2).astype(np.float32) for parts in zip(*blocks, strict=True)
    )
    inputs |= {"dy": rng.standard_normal(out.shape, dtype=np.float32)}
    inputs |= {"softmax_max": softmax_max, "softmax_sum": softmax_sum, "attention_in": out}

    def check_grad(outputs):
        # dq of a row reads that row alone; dk and dv sum over every row (the oracle tests hold them).
        stats = ("dy", "softmax_max", "softmax_sum", "attention_in")
        given = {n: inputs[n][:, :, CHECKED].astype(np.float64) for n in stats}
        dq = flash_attention_grad_oracle(q[:, :, CHECKED], k, v, **given, **attrs)[0]
        assert_close(outputs[0][:, :, CHECKED], dq, TOL[F32])
        assert all(np.isfinite(o).all() for o in outputs[1:])

    return Scratch(attrs, inputs, check_grad)


SCRATCH = {"attention_long": long_call}
