"""Hypothesis strategies for the differential fuzz tests: per op, valid calls (random ranks, shapes
with empty and size-1 axes, dtypes, attributes, layouts, thread counts) that carry their float64
oracle check, and invalid ones (one contract rule broken) the library must refuse with an ONNX
Runtime error naming the op. Array contents come from a drawn seed, so hypothesis shrinks
geometry, not numbers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from cases import raw_outputs
from hypothesis import assume
from hypothesis import strategies as st

from oracles import (
    BF16,
    F16,
    F32,
    PAIRS,
    TOL,
    _lightning_tokens,
    assert_close,
    lightning_indexer_grad_inputs,
    lightning_indexer_grad_oracle,
    rms_norm_grad_oracle,
    rms_norm_oracle,
    rope_grad_oracle,
    rope_oracle,
)

FLOATS = [F32, F16, BF16]
INT32_EXTREMES = [np.iinfo(np.int32).min, np.iinfo(np.int32).min + 1, -2, np.iinfo(np.int32).max]
INT64_EXTREMES = [*INT32_EXTREMES, np.iinfo(np.int64).min, np.iinfo(np.int64).max, 2**32, -(2**32)]


@dataclass
class Valid:
    """A call that must match the oracle: ``check(outputs)`` raises if it does not."""

    op: str
    inputs: dict
    attrs: dict
    outputs: list[str] | None
    check: Callable
    threads: int = 1


@dataclass
class Invalid:
    """A call that breaks one rule: the error must name the op and ``names`` (an input or
    attribute), when given. ``outputs`` maps the node's output names to NumPy dtypes."""

    op: str
    inputs: dict
    attrs: dict
    outputs: dict
    names: str | None = None


def rngs():
    return st.integers(0, 2**32 - 1).map(np.random.default_rng)


def extent(high=4):
    """An axis length: empty and size-1 axes come up often."""
    return st.one_of(st.sampled_from([0, 1]), st.integers(0, high))


def random(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def close(out, ref, tol, scale=None):
    """||out - ref|| <= tol * ||scale|| (scale: ref itself, or the same sums taken over absolute
    values where the formula cancels)."""
    out = np.asarray(out)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    if scale is None:
        return assert_close(out, ref, tol)
    err = np.linalg.norm(out.astype(np.float64) - ref)
    assert err <= tol * np.linalg.norm(scale), f"error {err:.3g} > {tol} * {np.linalg.norm(scale):.3g}"


# RmsNorm family ---------------------------------------------------------------------------------


@st.composite
def norm_shapes(draw):
    rank_x = draw(st.integers(1, 4))
    rank_gamma = draw(st.integers(1, rank_x))
    lead = [draw(extent()) for _ in range(rank_x - rank_gamma)]
    last = draw(st.one_of(extent(40), st.integers(100, 300)))
    norm = [draw(extent(3)) for _ in range(rank_gamma - 1)] + [last]
    return tuple(lead + norm), tuple(norm)


def rstd_forms(lead, rank_gamma):
    """Every rstd shape the contract accepts for rows of shape ``lead``."""
    keepdims = (*lead, *(1,) * rank_gamma)
    squeezed = tuple(d for d in lead if d != 1)
    return [keepdims, tuple(lead), squeezed, (1, *squeezed), (*squeezed, 1, 1)]


@st.composite
def rms_norm_valid(draw):
    x_shape, gamma_shape = draw(norm_shapes())
    t, tg = draw(st.sampled_from(PAIRS))
    rng = draw(rngs())
    attrs = draw(st.sampled_from([{}, {"epsilon": 1e-5}, {"epsilon": 0.5}, {"epsilon": 1e-12}]))
    x = random(rng, x_shape, t, draw(st.sampled_from([1.0, 1e-2, 30.0])))
    gamma = random(rng, gamma_shape, tg)

    def check(outputs):
        y, rstd = outputs
        ref_y, ref_rstd = rms_norm_oracle(x, gamma, attrs.get("epsilon", 1e-6))
        close(y, ref_y, TOL[t])
        close(rstd, ref_rstd, TOL[F32])
        assert (y.dtype, rstd.dtype) == (t, F32)

    return Valid("RmsNorm", {"x": x, "gamma": gamma}, attrs, None, check, draw(st.sampled_from([1, 2])))


def rms_norm_grad_magnitudes(dy, x, rstd, gamma):
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
def rms_norm_grad_valid(draw):
    x_shape, gamma_shape = draw(norm_shapes())
    t, tg = draw(st.sampled_from(PAIRS))
    rng = draw(rngs())
    x = random(rng, x_shape, t, draw(st.sampled_from([1.0, 1e-2, 30.0])))
    gamma = random(rng, gamma_shape, tg)
    n = len(x_shape) - len(gamma_shape)
    rstd = rms_norm_oracle(x, gamma, 1e-6)[1].astype(np.float32)
    if draw(st.booleans()):
        # Any positive rstd is valid, not only the forward's; staying near it keeps dx inside
        # float16's range.
        rstd = (rstd * np.exp(rng.standard_normal(rstd.shape) / 2)).astype(np.float32)
    rstd = rstd.reshape(draw(st.sampled_from(rstd_forms(x_shape[:n], len(gamma_shape)))))
    inputs = {"dy": random(rng, x_shape, t), "x": x, "rstd": rstd, "gamma": gamma}

    def check(outputs):
        dx, dgamma = outputs
        ref_dx, ref_dgamma = rms_norm_grad_oracle(**inputs)
        mag_dx, mag_dgamma = rms_norm_grad_magnitudes(**inputs)
        close(dx, ref_dx, TOL[t], mag_dx)
        close(dgamma, ref_dgamma, TOL[F32], mag_dgamma)
        assert (dx.dtype, dgamma.dtype) == (t, F32)

    return Valid("RmsNormGrad", inputs, {}, None, check, draw(st.sampled_from([1, 2])))


BAD_PAIRS = [(F32, F16), (F32, BF16), (F16, BF16), (BF16, F16)]


@st.composite
def rms_norm_invalid(draw, op="RmsNorm"):
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


# RoPE family ------------------------------------------------------------------------------------


@st.composite
def rope_geometry(draw):
    """(data shape, cos shape, mode): rank 3 (TND) or 4 (BNSD, BSND, SBND alike), cos broadcast
    along any subset of the leading axes."""
    mode = draw(st.integers(0, 3))
    rank = draw(st.sampled_from([3, 4]))
    lead = [draw(extent()) for _ in range(rank - 1)]
    step = 4 if mode == 2 else 2
    d = step * draw(st.one_of(st.integers(0, 4), st.integers(5, 40)))
    table = [1 if draw(st.booleans()) else n for n in lead]
    return (*lead, d), (*table, d), mode


@st.composite
def rope_valid(draw):
    shape, table, mode = draw(rope_geometry())
    t = draw(st.sampled_from(FLOATS))
    rng = draw(rngs())
    inputs = {"x": random(rng, shape, t), "cos": random(rng, table, t), "sin": random(rng, table, t)}

    def check(outputs):
        (y,) = outputs
        close(y, rope_oracle(**inputs, mode=mode), TOL[t])
        assert y.dtype == t

    return Valid(
        "RotaryPositionEmbedding", inputs, {"mode": mode}, None, check, draw(st.sampled_from([1, 2]))
    )


@st.composite
def rope_grad_valid(draw):
    shape, table, mode = draw(rope_geometry())
    t = draw(st.sampled_from(FLOATS))
    rng = draw(rngs())
    inputs = {"dy": random(rng, shape, t), "cos": random(rng, table, t), "sin": random(rng, table, t)}
    outputs = ["dx"]
    if draw(st.booleans()):
        inputs["x"] = random(rng, shape, t)
        outputs += draw(st.sampled_from([["dcos", "dsin"], ["dcos"], ["dsin"], []]))

    def check(produced):
        refs = rope_grad_oracle(inputs["dy"], inputs["cos"], inputs["sin"], inputs.get("x"), mode)
        by_name = dict(zip(["dx", "dcos", "dsin"], refs, strict=True))
        for name, out in zip(outputs, produced, strict=True):
            close(out, by_name[name], TOL[t])
            assert out.dtype == t

    attrs = {"mode": mode}
    return Valid("RotaryPositionEmbeddingGrad", inputs, attrs, outputs, check, draw(st.sampled_from([1, 2])))


@st.composite
def rope_invalid(draw, op="RotaryPositionEmbedding"):
    shape, table, mode = draw(rope_geometry())
    rng = draw(rngs())
    t = tc = F32
    grad = op != "RotaryPositionEmbedding"
    rules = ["mode", "odd D", "cos rank", "cos last axis", "cos axis", "sin shape", "data rank 0", "cos type"]
    rule = draw(st.sampled_from(rules + (["x shape", "sums without x"] if grad else [])))
    data_name = "dy" if grad else "x"
    names = {"mode": "mode", "odd D": data_name, "cos rank": "cos", "cos last axis": "cos", "cos axis": "cos"}
    names |= {"sin shape": "sin", "data rank 0": data_name, "cos type": None, "x shape": "x"}
    names["sums without x"] = "dcos"
    sin_table, x_shape, outputs = table, shape, {"dx": t} if grad else {"y": t}
    if rule == "mode":
        mode = draw(st.sampled_from([-1, 4, 5, *INT64_EXTREMES]))
    elif rule == "odd D":
        shape = (*shape[:-1], shape[-1] + (2 if mode == 2 else 1))
        table = sin_table = (*table[:-1], shape[-1])
        x_shape = shape
    elif rule == "cos rank":
        table = sin_table = draw(st.sampled_from([table[1:], (1, *table)]))
    elif rule == "cos last axis":
        assume(shape[-1] > 1)
        table = sin_table = (*table[:-1], 1)
    elif rule == "cos axis":
        axis = draw(st.integers(0, len(shape) - 2))
        table = sin_table = tuple(shape[i] + 2 if i == axis else n for i, n in enumerate(table))
    elif rule == "sin shape":
        sin_table = (*table[:-1], table[-1] + 2)
    elif rule == "data rank 0":
        shape = x_shape = ()
    elif rule == "cos type":
        tc = F16
    elif rule == "x shape":
        x_shape = (*shape[:-1], shape[-1] + 2)
    inputs = {
        data_name: random(rng, shape, t),
        "cos": random(rng, table, tc),
        "sin": random(rng, sin_table, tc),
    }
    if grad and rule != "sums without x":
        if rule == "x shape" or draw(st.booleans()):
            inputs["x"] = random(rng, x_shape, t)
    if rule == "sums without x":
        outputs = {"dx": t, "dcos": t, "dsin": t}
    return Invalid(op, inputs, {"mode": int(mode)}, outputs, names[rule])


# LightningIndexer family ------------------------------------------------------------------------


@st.composite
def indexer_geometry(draw):
    """Keyword arguments of lightning_indexer_grad_inputs: layout, sparse mode and batch shapes,
    TND batches of random lengths (empty ones included)."""
    layout = draw(st.sampled_from(["BSND", "TND"]))
    geometry = {
        "layout": layout,
        "sparse_mode": draw(st.sampled_from([0, 3])),
        "n1": draw(st.integers(1, 4)),
        "d": draw(st.one_of(st.integers(1, 8), st.integers(9, 40))),
        "k": draw(st.one_of(st.integers(1, 4), st.integers(5, 12))),
    }
    if layout == "BSND":
        geometry |= {"batch": draw(extent(3)), "s1": draw(extent(6)), "s2": draw(extent(9))}
    else:
        batches = draw(st.integers(1, 3))
        geometry["lengths_q"] = tuple(np.cumsum([draw(extent(6)) for _ in range(batches)]))
        geometry["lengths_k"] = tuple(np.cumsum([draw(extent(9)) for _ in range(batches)]))
        geometry["lengths_dtype"] = draw(st.sampled_from([np.int32, np.int64]))
    return geometry


def token_view(inputs, layout):
    """The oracles' per-token view (float64 query, key and weights rows; per token its position,
    S1_b, S2_b and first key row) of LightningIndexer inputs."""
    lengths = {k: v for k, v in inputs.items() if k.startswith("actual_seq_lengths")}
    return _lightning_tokens(layout, inputs["query"], inputs["key"], inputs["weights"], **lengths)


@st.composite
def lightning_indexer_valid(draw):
    geometry = draw(indexer_geometry())
    layout, mode, count = geometry.pop("layout"), geometry.pop("sparse_mode"), geometry.pop("k")
    t = draw(st.sampled_from(FLOATS))
    rng = draw(rngs())
    full = lightning_indexer_grad_inputs(rng, layout, mode, t, np.int32, k=1, **geometry)
    inputs = {name: a for name, a in full.items() if name not in ("dy", "sparse_indices")}
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
def lightning_indexer_grad_valid(draw):
    geometry = draw(indexer_geometry())
    layout, mode = geometry.pop("layout"), geometry.pop("sparse_mode")
    t = draw(st.sampled_from(FLOATS))
    index_type = draw(st.sampled_from([np.int32, np.int64]))
    rng = draw(rngs())
    skip = draw(st.sampled_from([0.0, 0.2, 1.0]))
    inputs = lightning_indexer_grad_inputs(rng, layout, mode, t, index_type, skip_fraction=skip, **geometry)
    attrs = {"head_num": geometry["n1"], "layout": layout, "sparse_mode": mode}
    attrs |= draw(st.sampled_from([{}, {"deterministic": 1}, {"pre_tokens": 65536, "next_tokens": 0}]))

    def check(outputs):
        refs = lightning_indexer_grad_oracle(**inputs, layout=layout, sparse_mode=mode)
        for out, ref in zip(outputs, refs, strict=True):
            close(out, ref, TOL[t])
            assert out.dtype == t

    return Valid("LightningIndexerGrad", inputs, attrs, None, check, draw(st.sampled_from([1, 2])))


@st.composite
def lightning_indexer_invalid(draw, op="LightningIndexer"):
    geometry = draw(indexer_geometry())
    layout, mode, count = geometry.pop("layout"), geometry.pop("sparse_mode"), geometry.pop("k")
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
            geometry = {k: v for k, v in geometry.items() if k not in ("batch", "s1", "s2")}
            geometry.setdefault("lengths_q", (3, 7))
            geometry.setdefault("lengths_k", (4, 9))
        else:
            geometry = {k: v for k, v in geometry.items() if not k.startswith("lengths")}
    if rule == "hostile index":
        mode = 0  # every slot counts
        geometry["batch"] = geometry["s1"] = geometry["s2"] = 1
        if layout == "TND":
            geometry["lengths_q"] = geometry["lengths_k"] = (1,)
    inputs = lightning_indexer_grad_inputs(rng, layout, mode, F32, np.int32, k=count, **geometry)
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
                st.sampled_from(["missing", "decreasing", "negative", "short", "long", "count", "rank"])
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
            else:
                inputs[name] = lengths[None]
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


VALID = {
    "RmsNorm": rms_norm_valid(),
    "RmsNormGrad": rms_norm_grad_valid(),
    "RotaryPositionEmbedding": rope_valid(),
    "RotaryPositionEmbeddingGrad": rope_grad_valid(),
    "LightningIndexer": lightning_indexer_valid(),
    "LightningIndexerGrad": lightning_indexer_grad_valid(),
}
INVALID = {
    "RmsNorm": rms_norm_invalid("RmsNorm"),
    "RmsNormGrad": rms_norm_invalid("RmsNormGrad"),
    "RotaryPositionEmbedding": rope_invalid("RotaryPositionEmbedding"),
    "RotaryPositionEmbeddingGrad": rope_invalid("RotaryPositionEmbeddingGrad"),
    "LightningIndexer": lightning_indexer_invalid("LightningIndexer"),
    "LightningIndexerGrad": lightning_indexer_invalid("LightningIndexerGrad"),
}
