"""Runs RmsNormGrad, RotaryPositionEmbedding or LightningIndexer once through the aclnn backend
in a fresh process (whose CANN libraries the environment chooses) and prints "ok" or the error.
Usage: python aclnn_probe.py OP"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cases import small  # noqa: E402
from oracles import F16  # noqa: E402
from ort_ascend_ops import aclnn_emulator, make_op_model, make_session  # noqa: E402

op = sys.argv[1]
inputs, attrs = small(op, F16)
model = make_op_model(op, {name: (a.dtype, a.shape) for name, a in inputs.items()}, attrs)
try:
    make_session(model, options=aclnn_emulator.session_options()).run(inputs)
    print("ok")
except Exception as error:  # noqa: BLE001 - the probe reports whatever ONNX Runtime raised
    print(f"{type(error).__name__}: {error}")
