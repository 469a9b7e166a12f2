"""The onnxscript RotaryPositionEmbedding/RotaryPositionEmbeddingGrad references on three engines:
outputs left out, empty tensors, finite differences and ONNX Runtime's warnings (their oracle
tests are in test_rotary_position_embedding*.py)."""

import numpy as np
import onnxruntime as ort
import pytest

from engines import ENGINES, run
from oracles import (
    F16,
    F32,
    ROPE_LAYOUTS,
    ROPE_MODES,
    TOL,
    assert_close,
    rope_grad_oracle,
    rope_inputs,
)
from ort_ascend_ops.op_model import make_op_model


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
