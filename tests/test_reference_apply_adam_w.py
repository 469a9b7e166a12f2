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


def test_the_reference_reads_float32_attributes_as_the_decimals_torch_users_wrote():
    """TorchDecimal against NumPy's shortest round trip of the float32 (its str)."""
    import onnx
    from onnx import TensorProto, helper

    from ort_ascend_ops.reference.registry import HELPERS

    helper_function = next(f for f in HELPERS if f.name == "TorchDecimal").to_function_proto()
    rng = np.random.default_rng()
    values = [0.9, 0.999, 0.95, 0.98, 0.01, 0.1, 0.0, 0.5, 1.5, 0.12345678, 1e-8]
    values += [float(v) for v in rng.uniform(0, 1, 20).astype(np.float32)]
    # Small ones too, which need more decimal places than significant digits (4.233382e-05).
    values += [4.233382e-05] + [float(v) for v in (10 ** rng.uniform(-8, 0, 20)).astype(np.float32)]
    for value in values:
        node = helper.make_node("TorchDecimal", [], ["y"], domain=helper_function.domain, value=value)
        graph = helper.make_graph(
            [node], "g", [], [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [])]
        )
        opsets = [helper.make_opsetid("", 18), helper.make_opsetid(helper_function.domain, 1)]
        model = helper.make_model(graph, opset_imports=opsets, functions=[helper_function])
        onnx.checker.check_model(model)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        (got,) = session.run(None, {})
        assert float(got) == float(str(np.float32(value))), value
