"""The onnxscript RotaryPositionEmbedding/RotaryPositionEmbeddingGrad references against float64
NumPy oracles written from the seed page, on three engines."""

import numpy as np
import onnxruntime as ort
import pytest

from engines import ENGINES, run
from oracles import (
    BF16,
    F16,
    F32,
    ROPE_LAYOUTS,
    ROPE_MODES,
    ROPE_SEED_COS,
    ROPE_SEED_DY,
    ROPE_SEED_SIN,
    TOL,
    assert_close,
    rope_grad_oracle,
    rope_inputs,
    rope_oracle,
)
from ort_ascend_ops.op_model import make_op_model

# All layouts in float32; the half types on one layout per data layout, with broadcast tables.
CASES = [(layout, F32) for layout in ROPE_LAYOUTS] + [
    (layout, t)
    for layout in ROPE_LAYOUTS
    if layout[0] in ("BNSD-11SD", "BSND-BS1D", "TND-T1D")
    for t in (F16, BF16)
]
CASE_IDS = [f"{layout[0]}-{t.name}" for layout, t in CASES]
GRAD_CASES = [
    pytest.param(engine, layout, t, id=f"{engine}-{case_id}")
    for engine in ENGINES
    for (layout, t), case_id in zip(CASES, CASE_IDS, strict=True)
]


def _check_dtypes(engine, outputs, t):
    if engine != "ort":  # ORT outputs went through a Cast to float32
        assert all(np.asarray(o).dtype == t for o in outputs)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ROPE_MODES)
@pytest.mark.parametrize("layout, t", CASES, ids=CASE_IDS)
def test_rope(engine, mode, layout, t, rng):
    inputs = rope_inputs(rng, layout, t, "x", "cos", "sin")
    (y,) = run(engine, "RotaryPositionEmbedding", inputs, {"mode": mode})
    assert_close(y, rope_oracle(**inputs, mode=mode), TOL[t])
    _check_dtypes(engine, [y], t)


@pytest.mark.parametrize("mode", ROPE_MODES)
@pytest.mark.parametrize("engine, layout, t", GRAD_CASES)
def test_rope_grad(engine, mode, layout, t, rng):
    inputs = rope_inputs(rng, layout, t, "dy", "cos", "sin", "x")
    outputs = run(engine, "RotaryPositionEmbeddingGrad", inputs, {"mode": mode})
    for out, ref in zip(outputs, rope_grad_oracle(**inputs, mode=mode), strict=True):
        assert_close(out, ref, TOL[t])
    _check_dtypes(engine, outputs, t)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ROPE_MODES)
@pytest.mark.parametrize("t", [F32, F16, BF16], ids=str)
def test_rope_grad_without_x(engine, mode, t, rng):
    """The node has no x and produces dx alone."""
    inputs = rope_inputs(rng, ROPE_LAYOUTS[0], t, "dy", "cos", "sin")
    (dx,) = run(engine, "RotaryPositionEmbeddingGrad", inputs, {"mode": mode})
    assert_close(dx, rope_grad_oracle(**inputs, x=None, mode=mode)[0], TOL[t])


@pytest.mark.parametrize("engine", ENGINES)
def test_rope_grad_dx_only_with_x(engine, rng):
    """x is given but dcos and dsin are not asked for."""
    inputs = rope_inputs(rng, ROPE_LAYOUTS[0], F32, "dy", "cos", "sin", "x")
    (dx,) = run(engine, "RotaryPositionEmbeddingGrad", inputs, {"mode": 1}, outputs=["dx"])
    assert_close(dx, rope_grad_oracle(**inputs, mode=1)[0], TOL[F32])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "data_shape, table_shape", [((0, 3, 5, 16), (1, 1, 5, 16)), ((2, 3, 0, 16), (1, 1, 0, 16))]
)
def test_rope_empty(engine, data_shape, table_shape, rng):
    layout = ("empty", data_shape, table_shape)
    inputs = rope_inputs(rng, layout, F32, "x", "cos", "sin")
    (y,) = run(engine, "RotaryPositionEmbedding", inputs, {"mode": 3})
    assert np.asarray(y).shape == data_shape
    inputs = rope_inputs(rng, layout, F32, "dy", "cos", "sin", "x")
    dx, dcos, dsin = run(engine, "RotaryPositionEmbeddingGrad", inputs, {"mode": 3})
    assert np.asarray(dx).shape == data_shape
    np.testing.assert_array_equal(dcos, np.zeros(table_shape))
    np.testing.assert_array_equal(dsin, np.zeros(table_shape))


@pytest.mark.parametrize("engine", ENGINES)
def test_rope_grad_seed_example(engine):
    inputs = {
        name: np.array(values, dtype=np.float32).reshape(1, 1, 1, 128)
        for name, values in [("dy", ROPE_SEED_DY), ("cos", ROPE_SEED_COS), ("sin", ROPE_SEED_SIN)]
    }
    (dx,) = run(engine, "RotaryPositionEmbeddingGrad", inputs, {"mode": 1})
    assert_close(dx, rope_grad_oracle(**inputs, x=None, mode=1)[0], TOL[F32])
    # By hand, the first pair: (cos[0] * dy[0] + sin[1] * dy[1], cos[1] * dy[1] - sin[0] * dy[0]).
    np.testing.assert_array_equal(dx[0, 0, 0, :2], [41 * 74 + 56 * 54, 37 * 54 - 46 * 74])


def _session(op_name, inputs, mode):
    types = {name: (a.dtype, a.shape) for name, a in inputs.items()}
    model = make_op_model(op_name, types, {"mode": mode})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda **feed: session.run(None, feed)


@pytest.mark.parametrize("mode", ROPE_MODES)
def test_rope_grad_matches_finite_differences(mode, rng):
    # L = sum(y * dy) is linear in each of x, cos and sin, so a central difference is exact up to
    # float32 rounding: (L(a + h v) - L(a - h v)) / 2h = <dL/da, v>.
    inputs = rope_inputs(rng, ROPE_LAYOUTS[0], F32, "x", "cos", "sin")
    dy = rng.standard_normal(inputs["x"].shape).astype(np.float32)
    forward = _session("RotaryPositionEmbedding", inputs, mode)
    grads = _session("RotaryPositionEmbeddingGrad", {"dy": dy, **inputs}, mode)(dy=dy, **inputs)

    def loss(**feed):
        return np.sum(forward(**feed)[0].astype(np.float64) * dy)

    h = 0.5
    for name, grad in zip(["x", "cos", "sin"], grads, strict=True):
        v = rng.standard_normal(inputs[name].shape).astype(np.float32)
        plus = loss(**inputs | {name: inputs[name] + h * v})
        minus = loss(**inputs | {name: inputs[name] - h * v})
        assert (plus - minus) / (2 * h) == pytest.approx(np.sum(grad.astype(np.float64) * v), rel=1e-4)


def test_ort_loads_without_warnings(capfd):
    # ONNX Runtime only reports some problems of an inlined function in warnings on stderr: wrong
    # static shapes inferred for in-graph shape arithmetic (as for RmsNorm), or a name captured by
    # the If branch that it cannot rename.
    for (_, data_shape, table_shape), t in [(ROPE_LAYOUTS[0], F32), (ROPE_LAYOUTS[-2], F16)]:
        for data, table in [(data_shape, table_shape), (("B",) + data_shape[1:], table_shape)]:
            tables = {"cos": (t, table), "sin": (t, table)}
            for op_name, types in [
                ("RotaryPositionEmbedding", {"x": (t, data)} | tables),
                ("RotaryPositionEmbeddingGrad", {"dy": (t, data), "x": (t, data)} | tables),
                ("RotaryPositionEmbeddingGrad", {"dy": (t, data)} | tables),
            ]:
                for mode in ROPE_MODES:
                    model = make_op_model(op_name, types, {"mode": mode})
                    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    err = capfd.readouterr().err
    assert "MergeShapeInfo" not in err and "CanUpdateImplicitInputNameInSubgraphs" not in err, err
