"""The onnxscript SwiGlu and SwiGluGrad references: ONNX Runtime's shape inference of them, and
that the output waits for every check (their oracle tests are in test_swi_glu*.py over every
engine)."""

import numpy as np
import onnxruntime as ort
import pytest

from oracles import F32, GLU_TYPES
from ort_ascend_ops import make_op_model, make_session


@pytest.mark.parametrize("t", GLU_TYPES, ids=str)
@pytest.mark.parametrize("op", ["SwiGlu", "SwiGluGrad"])
def test_ort_load_time_shape_inference_is_consistent(op, t, capfd):
    for shape, half in [((3, 64), (3, 32)), (("R", 64), ("R", 32))]:
        types = {"x": (t, shape)} | ({"dy": (t, half)} if op == "SwiGluGrad" else {})
        ort.InferenceSession(make_op_model(op, types).SerializeToString(), providers=["CPUExecutionProvider"])
    assert "MergeShapeInfo" not in capfd.readouterr().err


def test_a_static_odd_extent_fails_at_load():
    with pytest.raises(Exception, match="two equal halves|odd"):
        make_op_model("SwiGlu", {"x": (F32, (3, 5))})


def test_dynamic_dims_check_at_run_time():
    model = make_op_model("SwiGlu", {"x": (F32, [None, None])}, {"dim": 0})
    session = make_session(model, native=False)
    assert session.run({"x": np.ones((4, 3), F32)})[0].shape == (2, 3)
    with pytest.raises(Exception, match="SwiGlu: input 'x' must have an even extent"):
        session.run({"x": np.ones((5, 3), F32)})
