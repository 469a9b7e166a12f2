"""The onnxscript GroupedMatmul and GroupedMatmulWeightGrad references: ONNX Runtime's shape
inference of them, and that the output waits for every check (their oracle tests are in
test_grouped_matmul*.py over every engine)."""

import numpy as np
import onnxruntime as ort
import pytest

from oracles import F32, GMM_TYPES
from ort_ascend_ops import make_op_model, make_session


@pytest.mark.parametrize("t", GMM_TYPES, ids=str)
@pytest.mark.parametrize("op", ["GroupedMatmul", "GroupedMatmulWeightGrad"])
def test_ort_load_time_shape_inference_is_consistent(op, t, capfd):
    for m in (12, "M"):
        second = {"weight": (t, (3, 8, 5))} if op == "GroupedMatmul" else {"dy": (t, (m, 5))}
        types = {"x": (t, (m, 8))} | second | {"group_list": (np.int64, (3,))}
        ort.InferenceSession(make_op_model(op, types).SerializeToString(), providers=["CPUExecutionProvider"])
    assert "MergeShapeInfo" not in capfd.readouterr().err


def test_a_static_mismatch_of_ranks_fails_at_load():
    with pytest.raises(Exception, match="rank"):
        make_op_model(
            "GroupedMatmul",
            {"x": (F32, (4, 8, 1)), "weight": (F32, (2, 8, 5)), "group_list": (np.int64, (2,))},
        )


def test_dynamic_dims_check_at_run_time():
    types = {"x": (F32, [None, None]), "weight": (F32, [None, None, None]), "group_list": (np.int64, [None])}
    session = make_session(make_op_model("GroupedMatmul", types), native=False)
    inputs = {"x": np.ones((5, 3), F32), "weight": np.ones((2, 3, 4), F32), "group_list": np.array([2, 3])}
    np.testing.assert_array_equal(session.run(inputs)[0], np.full((5, 4), 3, F32))
    with pytest.raises(
        Exception, match="GroupedMatmul: input 'group_list' must hold counts adding up to x.shape"
    ):
        session.run(inputs | {"group_list": np.array([2, 2])})
