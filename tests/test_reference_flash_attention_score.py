"""The onnxscript FlashAttentionScore/Grad references: ONNX Runtime's shape inference of them, static
and symbolic, in every layout (their oracle tests are in test_flash_attention_score*.py over every
engine)."""

import numpy as np
import onnxruntime as ort
import pytest

from oracles import BF16, F16, F32, FA_LAYOUTS, flash_attention_inputs
from ort_ascend_ops.op_model import make_op_model


def symbolic(shape):
    return [f"d{i}" for i in range(len(shape))]


@pytest.mark.parametrize("t", [F32, F16, BF16], ids=str)
@pytest.mark.parametrize("layout", FA_LAYOUTS)
def test_ort_load_time_shape_inference_is_consistent(layout, t, capfd):
    rng = np.random.default_rng(0)
    lengths = {"lengths_q": [3, 5], "lengths_kv": [4, 6]} if layout == "TND" else {}
    for op_name, grad in [("FlashAttentionScore", False), ("FlashAttentionScoreGrad", True)]:
        inputs, attrs = flash_attention_inputs(
            rng, layout, t, batch=2, n1=4, n2=2, s1=5, s2=6, d=8, dv=16, grad=grad, **lengths
        )
        present = {name: a for name, a in inputs.items() if a is not None}
        for shape_of in (np.shape, lambda a: symbolic(np.shape(a))):
            types = {name: (a.dtype, shape_of(a)) for name, a in present.items()}
            model = make_op_model(op_name, types, attrs)
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert "MergeShapeInfo" not in capfd.readouterr().err
