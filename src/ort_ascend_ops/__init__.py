"""Ascend training kernels as ONNX operators (domain ``ort_ascend_ops``, opset 1).

- :func:`get_library_path`: the native custom-op library for ONNX Runtime.
- :func:`attach_functions`: attaches to a model the onnxscript reference implementations its
  nodes need, as ``FunctionProto``s, which make it portable to stock ONNX Runtime;
  :func:`function_protos` gives every op's.
- :func:`fuse`: a model's RMSNorm, rotary and DeepSeek-V3.2 indexer patterns rewritten to our ops.
- :func:`register_schemas`: the ops' schemas in ``onnx.defs`` (checker and shape inference).
- :func:`make_session`: an ONNX Runtime session with the library, NumPy (and bfloat16) in and out;
  :func:`make_ascend_session` the same on an Ascend NPU (CANN execution provider, aclnn kernels).
"""

try:
    import onnxruntime  # noqa: F401
except ImportError:
    # Not a dependency: onnxruntime and onnxruntime-cann are one module under two names.
    raise ImportError(
        "ort_ascend_ops needs ONNX Runtime: pip install 'ort_ascend_ops[cpu]' (onnxruntime), or on Ascend "
        "'ort_ascend_ops[cann]' (onnxruntime-cann)"
    ) from None

from .domain import DOMAIN
from .domain import VERSION as OPSET_VERSION
from .fusion import fuse
from .op_model import make_op_model
from .opschema import register_schemas
from .reference import attach_functions, function_protos
from .runtime import (
    Session,
    ascend_providers,
    get_library_path,
    make_ascend_session,
    make_session,
    session_options,
)

__all__ = [
    "DOMAIN",
    "OPSET_VERSION",
    "Session",
    "ascend_providers",
    "attach_functions",
    "function_protos",
    "fuse",
    "get_library_path",
    "make_ascend_session",
    "make_op_model",
    "make_session",
    "register_schemas",
    "session_options",
]
