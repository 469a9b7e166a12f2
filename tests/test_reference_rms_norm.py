"""The onnxscript RmsNorm/RmsNormGrad references: ONNX Runtime's shape inference of them (their
oracle tests, the epsilon attribute's among them, are in test_rms_norm*.py over every engine)."""

import onnxruntime as ort
import pytest

from oracles import (
    F32,
    PAIRS,
    pair_id,
)
from ort_ascend_ops.op_model import make_op_model


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
