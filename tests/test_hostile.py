"""Hostile values beyond the per-op tests and the fuzz corpus: empty tensors that claim
astronomical extents, NaN and Inf in every float input (they propagate as the float64 formula
says, SECURITY.md), unknown attributes and wrong input counts."""

import re

import numpy as np
import onnxruntime as ort
import pytest

from cases import CASES, raw_outputs, small
from engines import run
from harness import fed, raw_model
from oracles import (
    BF16,
    F16,
    F32,
    TOL,
    assert_close,
    lightning_indexer_grad_inputs,
    lightning_indexer_grad_oracle,
    rms_norm_grad_inputs,
    rms_norm_grad_oracle,
    rms_norm_oracle,
    rope_grad_oracle,
    rope_oracle,
)
from ort_ascend_ops import make_session
from ort_ascend_ops.opschema import load_op_specs

# NaN and Inf inputs make the float64 oracles warn, as they should: the warnings say nothing here.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

OPS = list(load_op_specs())


def run_shapes(op, shapes, attrs=None):
    """Runs op on float32 inputs of the given shapes, allocated by ONNX Runtime (NumPy refuses
    shapes like [0, 2^40, 2^40] even when empty). Returns the output shapes. A shape of None is an
    empty slot."""
    types = {
        name: {"sparse_indices": np.int32, "group_list": np.int64}.get(name, np.float32) for name in shapes
    }
    dummies = {
        name: None if shape is None else np.zeros((0,) * len(shape), types[name])
        for name, shape in shapes.items()
    }
    session = make_session(raw_model(op, dummies, raw_outputs(op), attrs))
    feeds = {
        name: ort.OrtValue.ortvalue_from_shape_and_type(list(shape), types[name])
        for name, shape in shapes.items()
        if shape is not None
    }
    for name, value in feeds.items():  # fill the small ones, so that no uninitialized memory is read
        if 0 < np.prod(value.shape(), dtype=object) < 1 << 20:
            # An optimizer's step counts from 1.
            value.update_inplace(np.full(value.shape(), name == "step", types[name]))
    return [value.shape() for value in session.ort.run_with_ort_values(list(raw_outputs(op)), feeds)]


EMPTY_BUT_VAST = [(op, *row) for op, cases in CASES.items() for row in cases.empty_but_vast]


@pytest.mark.parametrize(
    "op, shapes, attrs, expect", EMPTY_BUT_VAST, ids=lambda v: v if isinstance(v, str) else ""
)
def test_empty_tensors_with_vast_extents_are_empty_results_or_errors(op, shapes, attrs, expect):
    if expect is not None:
        assert run_shapes(op, shapes, attrs) == expect
        return
    with pytest.raises(Exception) as error:
        run_shapes(op, shapes, attrs)
    assert type(error.value).__module__.startswith("onnxruntime"), repr(error.value)


# NaN and Inf ----------------------------------------------------------------------------------


def assert_same_ieee(out, ref, tol):
    """NaN where the float64 formula gives NaN, the same infinities, and the finite rest close."""
    out = np.asarray(out).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(out), np.isposinf(ref))
    np.testing.assert_array_equal(np.isneginf(out), np.isneginf(ref))
    finite = np.isfinite(ref)
    err = np.linalg.norm(out[finite] - ref[finite])
    assert err <= tol * np.linalg.norm(ref[finite]) + 1e-30


def poisoned(rng, inputs, name, value):
    poisoned = dict(inputs)
    a = inputs[name].copy()
    a.reshape(-1)[rng.integers(a.size)] = value
    poisoned[name] = a
    return poisoned


SPECIALS = [np.nan, np.inf, -np.inf]
TYPES = [F32, F16, BF16]


@pytest.mark.parametrize("value", SPECIALS, ids=str)
@pytest.mark.parametrize("t", TYPES, ids=str)
@pytest.mark.parametrize("name", ["x", "gamma"])
def test_rms_norm_propagates_nan_and_inf(name, t, value, rng):
    inputs = {"x": rng.standard_normal((4, 37)).astype(t), "gamma": rng.standard_normal(37).astype(t)}
    inputs = poisoned(rng, inputs, name, value)
    y, rstd = run("native", "RmsNorm", inputs)
    ref_y, ref_rstd = rms_norm_oracle(inputs["x"], inputs["gamma"], 1e-6)
    assert_same_ieee(y, ref_y, TOL[t])
    assert_same_ieee(rstd, ref_rstd, TOL[F32])


@pytest.mark.parametrize("value", SPECIALS, ids=str)
@pytest.mark.parametrize("t", TYPES, ids=str)
@pytest.mark.parametrize("name", ["dy", "x", "rstd", "gamma"])
def test_rms_norm_grad_propagates_nan_and_inf(name, t, value, rng):
    inputs = poisoned(rng, rms_norm_grad_inputs(rng, (4, 37), (37,), t, t), name, value)
    for out, ref, tol in zip(
        run("native", "RmsNormGrad", inputs), rms_norm_grad_oracle(**inputs), (TOL[t], TOL[F32]), strict=True
    ):
        assert_same_ieee(out, ref, tol)


# Finite rows whose float32 sum of squares overflows: (D, magnitude) at the smallest magnitudes
# that do (16 * 1e38 and 4096 * 9e34 pass float32's 3.4e38), and at float32's largest.
LARGE_ROWS = [(16, 1e19), (4096, 3e17), (64, 3e38)]


@pytest.mark.parametrize("engine", ["native", "portable"], ids=["native", "reference_functions"])
@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("t", [F32, BF16], ids=str)
@pytest.mark.parametrize("d, magnitude", LARGE_ROWS)
def test_rms_norm_of_rows_too_large_to_square_in_float32(d, magnitude, t, threads, engine, rng):
    # One such row among ordinary ones: y = x / rms(x) * gamma and rstd as the float64 formula
    # gives them, not the 0 an overflowed sum gives.
    x = rng.standard_normal((3, d))
    x[1] *= magnitude / np.abs(x[1]).max()
    inputs = {"x": x.astype(t), "gamma": rng.standard_normal(d).astype(t)}
    y, rstd = run(engine, "RmsNorm", inputs, threads=threads)
    ref_y, ref_rstd = rms_norm_oracle(inputs["x"], inputs["gamma"], 1e-6)
    assert_close(y, ref_y, TOL[t])
    for row in range(3):
        assert_close(rstd[row], ref_rstd[row], TOL[F32])
    grad = rms_norm_grad_inputs(rng, (3, d), (d,), t, t) | {"x": inputs["x"], "rstd": ref_rstd.astype(F32)}
    for out, ref, tol in zip(
        run(engine, "RmsNormGrad", grad, threads=threads), rms_norm_grad_oracle(**grad),
        (TOL[t], TOL[F32]), strict=True,
    ):  # fmt: skip
        assert_close(out, ref, tol)


@pytest.mark.parametrize("value", SPECIALS, ids=str)
@pytest.mark.parametrize("t", TYPES, ids=str)
@pytest.mark.parametrize("name", ["x", "cos", "sin"])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_rope_propagates_nan_and_inf(mode, name, t, value, rng):
    inputs = {
        "x": rng.standard_normal((2, 3, 5, 32)).astype(t),
        "cos": rng.standard_normal((1, 1, 5, 32)).astype(t),
        "sin": rng.standard_normal((1, 1, 5, 32)).astype(t),
    }
    inputs = poisoned(rng, inputs, name, value)
    (y,) = run("native", "RotaryPositionEmbedding", inputs, {"mode": mode})
    assert_same_ieee(y, rope_oracle(**inputs, mode=mode), TOL[t])


@pytest.mark.parametrize("value", SPECIALS, ids=str)
@pytest.mark.parametrize("t", TYPES, ids=str)
@pytest.mark.parametrize("name", ["dy", "cos", "sin", "x"])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_rope_grad_propagates_nan_and_inf(mode, name, t, value, rng):
    shapes = {"dy": (2, 3, 5, 32), "x": (2, 3, 5, 32), "cos": (1, 1, 5, 32), "sin": (1, 1, 5, 32)}
    inputs = {n: rng.standard_normal(s).astype(t) for n, s in shapes.items()}
    inputs = poisoned(rng, inputs, name, value)
    outputs = run("native", "RotaryPositionEmbeddingGrad", inputs, {"mode": mode})
    refs = rope_grad_oracle(inputs["dy"], inputs["cos"], inputs["sin"], inputs["x"], mode)
    for out, ref in zip(outputs, refs, strict=True):
        assert_same_ieee(out, ref, TOL[t])


@pytest.mark.parametrize("value", SPECIALS, ids=str)
@pytest.mark.parametrize("t", TYPES, ids=str)
@pytest.mark.parametrize("name", ["query", "key", "dy", "weights"])
def test_lightning_indexer_grad_propagates_nan_and_inf(name, t, value, rng):
    inputs = lightning_indexer_grad_inputs(rng, "BSND", 0, t, np.int32, skip_fraction=0.0)
    inputs = poisoned(rng, inputs, name, value)
    attrs = {"head_num": 3, "layout": "BSND", "sparse_mode": 0}
    outputs = run("native", "LightningIndexerGrad", inputs, attrs)
    refs = lightning_indexer_grad_oracle(**inputs, layout="BSND", sparse_mode=0)
    for out, ref in zip(outputs, refs, strict=True):
        assert_same_ieee(out, ref, TOL[t])


@pytest.mark.parametrize("value", SPECIALS, ids=str)
@pytest.mark.parametrize("t", TYPES, ids=str)
@pytest.mark.parametrize("name", ["query", "key", "weights"])
def test_lightning_indexer_ranks_nan_scores_last(name, t, value, rng):
    """A NaN score ranks after every number (ties of NaN to the lower key); infinities rank as
    numbers."""
    inputs = lightning_indexer_grad_inputs(rng, "BSND", 0, t, np.int32)
    inputs = {n: a for n, a in inputs.items() if n in ("query", "key", "weights")}
    inputs = poisoned(rng, inputs, name, value)
    indices, values = run(
        "native", "LightningIndexer", inputs, {"layout": "BSND", "sparse_mode": 0, "sparse_count": 9}
    )
    q = inputs["query"].astype(np.float64)
    k = inputs["key"].astype(np.float64)[:, :, 0]
    w = inputs["weights"].astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        scores = np.einsum("bsj,bsjr->bsr", w, np.maximum(np.einsum("bsjd,brd->bsjr", q, k), 0))
    for b, s in np.ndindex(scores.shape[:2]):
        row = scores[b, s]
        numbers = [i for i in np.argsort(-row, kind="stable") if not np.isnan(row[i])]
        nans = [i for i in range(len(row)) if np.isnan(row[i])]
        expected = numbers + nans
        # Ties and near-ties among numbers may order either way after rounding: compare scores.
        got = indices[b, s]
        np.testing.assert_array_equal(np.isnan(row[got]), np.isnan(row[expected]))
        np.testing.assert_array_equal(got[np.isnan(row[got])], expected[len(numbers) :])
        finite = ~np.isnan(row[got])
        assert_same_ieee(values[b, s][finite], row[got][finite], TOL[t])
        ordered = row[got][finite]
        scale = np.abs(row[np.isfinite(row)]).max(initial=0.0)
        assert np.all(ordered[:-1] >= ordered[1:] - 1e-5 * scale)


# Wrong node shapes ----------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
def test_unknown_attribute_is_an_error_naming_it(op):
    inputs, attrs = small(op)
    with pytest.raises(Exception) as error:
        make_session(raw_model(op, inputs, raw_outputs(op), {**attrs, "epsilon_typo": 1})).run(inputs)
    assert type(error.value).__module__.startswith("onnxruntime")
    assert op in str(error.value) and "epsilon_typo" in str(error.value)


@pytest.mark.parametrize(
    "op, name, value",
    [
        ("RmsNorm", "epsilon", 1),
        ("RotaryPositionEmbedding", "mode", 1.0),
        ("RotaryPositionEmbeddingGrad", "mode", "half"),
        ("LightningIndexer", "layout", 1),
        ("LightningIndexer", "sparse_count", [2]),
        ("LightningIndexerGrad", "head_num", 3.0),
    ],
)
def test_attribute_of_the_wrong_type_is_an_error_not_the_default(op, name, value):
    inputs, attrs = small(op)
    model = raw_model(op, inputs, raw_outputs(op), {**attrs, name: value})
    with pytest.raises(Exception) as error:
        make_session(model).run(inputs)
    assert type(error.value).__module__.startswith("onnxruntime")
    assert op in str(error.value) and f"attribute '{name}' must be" in str(error.value)


@pytest.mark.parametrize("op", OPS)
def test_extra_input_is_an_error(op):
    inputs, attrs = small(op)
    slots = len(load_op_specs()[op].inputs)
    extra = {**inputs, **{f"extra{i}": np.ones(1, F32) for i in range(slots + 1 - len(inputs))}}
    node_inputs = [name if a is not None else "" for name, a in extra.items()]
    model = raw_model(op, extra, raw_outputs(op), attrs)
    assert list(model.graph.node[0].input) == node_inputs
    with pytest.raises(Exception) as error:
        make_session(model).run(fed(extra))
    assert type(error.value).__module__.startswith("onnxruntime")


def test_input_of_an_undeclared_type_is_an_error():
    inputs, attrs = small("RmsNorm")
    inputs = {"x": inputs["x"].astype(np.float64), "gamma": inputs["gamma"].astype(np.float64)}
    with pytest.raises(Exception) as error:
        make_session(raw_model("RmsNorm", inputs, {"y": np.float64, "rstd": F32})).run(inputs)
    assert type(error.value).__module__.startswith("onnxruntime") and "RmsNorm" in str(error.value)


@pytest.mark.parametrize(
    "op, inputs, outputs, rule",
    [
        (
            "RotaryPositionEmbedding",
            {"x": F32, "cos": F16, "sin": F32},
            {"y": F32},
            "cos has type tensor(float16)",
        ),
        (
            "RmsNormGrad",
            {"dy": F16, "x": F32, "rstd": F32, "gamma": F32},
            {"dx": F32, "dgamma": F32},
            "x has type",
        ),
        (
            "LightningIndexer",
            {"query": BF16, "key": BF16, "weights": F32},
            {"sparse_indices": np.int32, "sparse_values": BF16},
            "weights has type tensor(float)",
        ),
    ],
)
def test_mixed_element_types_are_an_error_naming_the_input(op, inputs, outputs, rule):
    # ONNX Runtime alone would say that no kernel matches the node's inputs.
    arrays = {
        name: np.zeros((1, 2, 2, 4) if name != "weights" else (1, 2, 2), t) for name, t in inputs.items()
    }
    if op == "RmsNormGrad":
        arrays = {name: np.zeros((2, 4), t) for name, t in inputs.items()} | {"gamma": np.zeros(4, F32)}
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidGraph, match=re.escape(rule)) as error:
        make_session(raw_model(op, arrays, outputs))
    assert op in str(error.value)


@pytest.mark.parametrize("native", [True, False], ids=["native", "reference_functions"])
def test_a_layout_with_a_nul_is_named_whole(native, rng):
    inputs = lightning_indexer_grad_inputs(rng, "BSND", 0, F32, np.int32)
    outputs = {"d_query": F32, "d_key": F32, "d_weights": F32}
    model = raw_model("LightningIndexerGrad", inputs, outputs, {"head_num": 3, "layout": "TND\0x"})
    with pytest.raises(Exception) as error:
        make_session(model, native=native).run(inputs)
    message = str(error.value)
    assert "LightningIndexerGrad" in message and "layout" in message and "'BSND'" in message
    assert r"'TND\x00x'" in message and "\0" not in message
