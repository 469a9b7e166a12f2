"""The onnxscript ApplyAdamW reference: ONNX Runtime's shape inference of it (its oracle tests are
in test_apply_adam_w.py over every engine)."""

import numpy as np
import onnxruntime as ort
import pytest

from oracles import ADAMW_PAIRS, pair_id
from ort_ascend_ops.op_model import make_op_model


@pytest.mark.parametrize("pair", ADAMW_PAIRS, ids=pair_id)
def test_ort_load_time_shape_inference_is_consistent(pair, capfd):
    tp, t = pair
    for shape in [(3, 64), ("R", 64)]:
        types = {name: (tp, shape) for name in ("param", "exp_avg", "exp_avg_sq")}
        types |= {"grad": (t, shape), "step": (np.int64, (1,)), "lr": (np.float32, (1,))}
        ort.InferenceSession(
            make_op_model("ApplyAdamW", types).SerializeToString(), providers=["CPUExecutionProvider"]
        )
    assert "MergeShapeInfo" not in capfd.readouterr().err
