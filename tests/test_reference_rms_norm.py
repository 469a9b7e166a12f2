"""The onnxscript RmsNorm/RmsNormGrad references: the epsilon attribute on three engines, and
ONNX Runtime's shape inference of them (their oracle tests are in test_rms_norm*.py)."""

import numpy as np
import onnxruntime as ort
import pytest

from engines import ENGINES, run
from oracles import (
    F32,
    PAIRS,
    TOL,
    assert_close,
    pair_id,
    rms_norm_oracle,
)
from ort_ascend_ops.op_model import make_op_model


@pytest.mark.parametrize("engine", ENGINES)
def test_rms_norm_epsilon(engine, rng):
    x = rng.standard_normal((3, 16)).astype(np.float32)
    gamma = rng.standard_normal((16,)).astype(np.float32)
    y, rstd = run(engine, "RmsNorm", {"x": x, "gamma": gamma}, {"epsilon": 0.5})
    y_ref, rstd_ref = rms_norm_oracle(x, gamma, 0.5)
    assert_close(y, y_ref, TOL[F32])
    assert_close(rstd, rstd_ref, TOL[F32])


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_ort_load_time_shape_inference_is_consistent(pair, capfd):
    # ONNX Runtime 1.32 infers wrong static shapes for some in-graph rank arithmetic (Size(Shape(.)))
    # and only says so in a "MergeShapeInfo" warning on stderr; results may still look right.
    t, tg = pair
    for x_shape in [(2, 3, 64), ("B", "S", 64)]:
        grad_types = {"dy": (t, x_shape), "x": (t, x_shape), "rstd": (F32, x_shape[:2]), "gamma": (tg, (64,))}
        norm_types = {"x": (t, x_shape), "gamma": (tg, (64,))}
        for op_name, types in [("RmsNorm", norm_types), ("RmsNormGrad", grad_types)]:
            model = make_op_model(op_name, types)
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert "MergeShapeInfo" not in capfd.readouterr().err
