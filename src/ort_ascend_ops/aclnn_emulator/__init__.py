"""The aclnn backend without an NPU: a host emulator of the CANN libraries (``lib64/``: device
memory is host memory, streams hold their work until the host waits for them, every aclnn entry
point checks its arguments as the vendor documents and computes with its own loops), complete
enough that ``onnxruntime-cann``'s CANN execution provider runs on it, with HCCL's collectives
(``libhccl.so``) between processes of one machine, a rank per process and emulated device
(``ACLEMU_DEVICE_COUNT`` devices, default 1), meeting in shared memory; and a build of the
custom-op library that registers the aclnn kernels under the CPU execution provider, for
environments with the plain ``onnxruntime``.

Tests drive the emulator through :func:`control` and make sessions with :func:`make_session`.
Results here say the backend and the execution provider call CANN as the vendor documents; they say
nothing about Ascend hardware.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

import onnx
import onnxruntime as ort

from ort_ascend_ops import runtime

CANN_EP = runtime.CANN_EP

_HERE = Path(os.environ.get("ORT_ASCEND_OPS_ACLNN_EMULATOR", Path(__file__).parent))


def home() -> str:
    """An ``ASCEND_HOME_PATH`` holding the emulated libraries (``lib64/``). For the CANN execution
    provider, ``lib64/`` must also be on ``LD_LIBRARY_PATH`` when the process starts, so that the
    provider and the backend load the same runtime."""
    return str(_HERE)


def through_cann_ep() -> bool:
    """Whether this ONNX Runtime is ``onnxruntime-cann``: sessions then run the aclnn kernels through
    its execution provider rather than through the CPU test build."""
    return CANN_EP in ort.get_available_providers()


def custom_opp() -> str:
    """An ``ASCEND_CUSTOM_OPP_PATH`` entry holding an old-signature custom package."""
    return str(_HERE / "custom_opp")


def library_path() -> str:
    """The custom-op library with the aclnn kernels registered for ``CPUExecutionProvider``."""
    path = _HERE / "libort_ascend_ops_aclnn_on_cpu.so"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; build with -DOAO_ACLNN_EMULATOR=ON (the default)")
    return str(path)


def activate() -> None:
    """Points the aclnn backend at the emulator; call before the first aclnn op in the process
    (the backend opens the CANN libraries once)."""
    os.environ["ASCEND_HOME_PATH"] = home()


def session_options(*, threads: int | None = None) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.register_custom_ops_library(library_path())
    options.add_session_config_entry(runtime.LIBRARY_KEY, "1")  # in place of the CPU library
    if threads is not None:
        options.intra_op_num_threads = threads
    return options


def make_session(
    model: onnx.ModelProto, *, threads: int | None = None, cpu_fallback: bool = False
) -> runtime.Session:
    """A session whose nodes of our domain run on the aclnn backend over the emulator: under
    ``onnxruntime-cann`` through its CANN execution provider (``ascend_providers``), every node on
    it unless ``cpu_fallback``; elsewhere through the CPU test build."""
    activate()
    if not through_cann_ep():
        return runtime.make_session(model, options=session_options(threads=threads))
    options = runtime.session_options(threads=threads)
    providers = runtime.ascend_providers()
    if not cpu_fallback:
        # ONNX Runtime refuses the option beside an explicit CPU EP.
        options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        providers = [p for p in providers if p != "CPUExecutionProvider"]
    return runtime.make_session(model, providers=providers, options=options)


@functools.cache
def control() -> ctypes.CDLL:
    """The emulator's control functions (``aclemu_*``, see native/aclnn_emulator/aclemu.h), in the
    same library instance the backend loads."""
    lib = ctypes.CDLL(str(_HERE / "lib64" / "libascendcl.so"))
    lib.aclemu_reset.argtypes = []
    lib.aclemu_fail.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p]
    lib.aclemu_set_workspace_size.argtypes = [ctypes.c_uint64]
    lib.aclemu_set_soc.argtypes = [ctypes.c_char_p]
    for name in ("aclemu_calls", "aclemu_live_tensors", "aclemu_live_executors"):
        getattr(lib, name).restype = ctypes.c_int64
    lib.aclemu_calls.argtypes = [ctypes.c_char_p]
    lib.aclemu_calls_from.restype = ctypes.c_int64
    lib.aclemu_calls_from.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    for name in (
        "aclemu_copied_bytes",
        "aclemu_collective_bytes",
        "aclemu_device_bytes",
        "aclemu_device_bytes_peak",
        "aclemu_refused_device_bytes",
    ):
        getattr(lib, name).restype = ctypes.c_int64
    lib.aclemu_copied_bytes.argtypes = [ctypes.c_char_p]
    lib.aclemu_collective_bytes.argtypes = [ctypes.c_char_p]
    lib.aclemu_device_bytes.argtypes = []
    lib.aclemu_device_bytes_peak.argtypes = []
    lib.aclemu_refused_device_bytes.argtypes = []
    lib.aclemu_set_device_memory.argtypes = [ctypes.c_uint64]
    lib.aclemu_set_device_memory.restype = None
    return lib


def counters() -> ctypes.CDLL | None:
    """``control()`` where the CANN runtime this process loaded is the emulator's (its
    libascendcl.so is mapped), else None: real CANN has no counters of the bus and memory."""
    library = os.path.realpath(_HERE / "lib64" / "libascendcl.so")
    mapped = Path("/proc/self/maps").read_text() if Path("/proc/self/maps").exists() else ""
    return control() if library in mapped else None
