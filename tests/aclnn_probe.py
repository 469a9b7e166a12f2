"""Runs RmsNormGrad, RotaryPositionEmbedding or LightningIndexer once through the aclnn backend
in a fresh process (whose CANN libraries the environment chooses) and prints "ok" or the error.
Usage: python aclnn_probe.py OP"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from ort_ascend_ops import aclnn_emulator, make_op_model, make_session  # noqa: E402

F16 = np.dtype(np.float16)
INPUTS = {
    "RmsNormGrad": {
        "dy": np.ones((2, 16), F16),
        "x": np.ones((2, 16), F16),
        "rstd": np.ones((2, 1), np.float32),
        "gamma": np.ones(16, F16),
    },
    "RotaryPositionEmbedding": {
        "x": np.ones((1, 2, 1, 8), F16),
        "cos": np.ones((1, 2, 1, 8), F16),
        "sin": np.ones((1, 2, 1, 8), F16),
    },
    "LightningIndexer": {
        "query": np.ones((1, 2, 4, 128), F16),
        "key": np.ones((1, 3, 1, 128), F16),
        "weights": np.ones((1, 2, 4), F16),
    },
}
ATTRS = {"LightningIndexer": {"sparse_count": 2}}

op = sys.argv[1]
inputs = INPUTS[op]
model = make_op_model(op, {name: (a.dtype, a.shape) for name, a in inputs.items()}, ATTRS.get(op, {}))
try:
    make_session(model, options=aclnn_emulator.session_options()).run(inputs)
    print("ok")
except Exception as error:  # noqa: BLE001 - the probe reports whatever ONNX Runtime raised
    print(f"{type(error).__name__}: {error}")
