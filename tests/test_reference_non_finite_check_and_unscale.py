"""The onnxscript NonFiniteCheckAndUnscale reference: ONNX Runtime's shape inference of it, and
that each output waits for every check (its oracle tests are in test_non_finite_check_and_unscale.py
over every engine)."""

import numpy as np
import onnxruntime as ort
import pytest

from oracles import F32, UNSCALE_TYPES, unscale_inputs
from ort_ascend_ops import make_op_model, make_session


@pytest.mark.parametrize("t", UNSCALE_TYPES, ids=str)
def test_ort_load_time_shape_inference_is_consistent(t, capfd):
    for shape in [(3, 64), ("R", 64)]:
        types = {"scaled_grads": (t, shape), "found_inf": (np.float32, (1,)), "inv_scale": (np.float32, (1,))}
        ort.InferenceSession(
            make_op_model("NonFiniteCheckAndUnscale", types).SerializeToString(),
            providers=["CPUExecutionProvider"],
        )
    assert "MergeShapeInfo" not in capfd.readouterr().err


@pytest.mark.parametrize("output", ["grads_out", "found_inf_out"])
def test_each_output_alone_still_checks_the_rules(output, rng):
    inputs = unscale_inputs(rng, (4,), F32) | {"inv_scale": np.ones(3, F32)}
    types = {name: (a.dtype, [None] * a.ndim) for name, a in inputs.items()}
    model = make_op_model("NonFiniteCheckAndUnscale", types, outputs=[output])
    with pytest.raises(Exception, match="inv_scale' must hold one value"):
        make_session(model, native=False).run(inputs)
