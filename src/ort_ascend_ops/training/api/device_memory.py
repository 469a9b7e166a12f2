"""Values in an NPU's memory (``Module(..., device="npu")``): the training state lives there across
steps, as torch_npu keeps a model's parameters, gradients and optimizer states, and sessions bind
it through IOBinding, so that a step moves only the batch, the loss and a few scalars over the bus.

onnxruntime-cann's Python API makes device values only by uploading NumPy (no bfloat16, no
views), so every copy here is a one-node session that ONNX Runtime runs on the EP: an upload binds
a host input and a device output, a download the reverse, and the views of one flat device buffer
per element type (the gradients' layout, as ``Buffers`` on the host) are the outputs of an Identity
bound to device addresses inside it, which the NPU's Identity leaves in place. Device addresses are
only ever handed back to ONNX Runtime: the host never reads one.

A host value bound to a device node's input is copied when it is bound, asynchronously: it must
live until the run is over (every caller holds the scalars and inputs it binds; one dropped at
once gave garbage, caught by the emulator, which runs the copy only when the stream is waited
for)."""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from ... import aclnn_emulator
from ...opschema import elem_type
from ...runtime import ascend_providers, check_device, device_providers, make_session
from ..checkpoint import Deferred
from .checkpoint_state import HOST, Slots, dtype_of, laid_out


def _identity(element: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "copy",
        [helper.make_tensor_value_info("x", element, None)],
        [helper.make_tensor_value_info("y", element, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _scale(element: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["factor"], ["typed"], to=element),
            helper.make_node("Mul", ["x", "typed"], ["y"]),
        ],
        "scale",
        [
            helper.make_tensor_value_info("x", element, None),
            helper.make_tensor_value_info("factor", onnx.TensorProto.FLOAT, []),
        ],
        [helper.make_tensor_value_info("y", element, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _zeros(element: int) -> onnx.ModelProto:
    """Zeros of the shape given, made on the device: one zero expanded, so that nothing but the
    shape crosses the bus."""
    graph = helper.make_graph(
        [helper.make_node("Expand", ["zero", "shape"], ["y"])],
        "zeros",
        [helper.make_tensor_value_info("shape", onnx.TensorProto.INT64, [None])],
        [helper.make_tensor_value_info("y", element, None)],
        initializer=[helper.make_tensor("zero", element, [], [0])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


_MODELS = {"copy": _identity, "scale": _scale, "zeros": _zeros}

# What ONNX Runtime's message holds when the CANN runtime refused an allocation: the EP's call, or
# ACL_ERROR_RT_MEMORY_ALLOCATION's code (acl.h).
_ALLOCATION_FAILED = ("aclrtMalloc", "207001")
_ACL_HBM_MEM = 1  # aclrtMemAttr
_ORT_ERRORS = (
    ort.capi.onnxruntime_pybind11_state.Fail,
    ort.capi.onnxruntime_pybind11_state.RuntimeException,
    RuntimeError,
)


class DeviceMemoryError(MemoryError):
    """A step that ran out of device memory (or whose allocation the runtime refused); the state
    is as it was before it."""


def _runtime_says() -> tuple[str, int, int]:
    """The CANN runtime's last error message on this thread (the bytes asked for, where it says
    so), and the device's free and total bytes now (``aclrtGetMemInfo``)."""
    runtime = ctypes.CDLL("libascendcl.so")  # the one the EP loaded: the loader shares it
    runtime.aclGetRecentErrMsg.restype = ctypes.c_char_p
    message = (runtime.aclGetRecentErrMsg() or b"").decode(errors="replace")
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    runtime.aclrtGetMemInfo(_ACL_HBM_MEM, ctypes.byref(free), ctypes.byref(total))
    return message, free.value, total.value


def _refused_bytes() -> int:
    """The refused allocation's bytes where the runtime is the emulator (which counts them; the
    EP's error does not say), else 0."""
    counters = aclnn_emulator.counters()
    return int(counters.aclemu_refused_device_bytes()) if counters is not None else 0


class DeviceMemory:
    """Values in the memory of NPU ``device`` (``"npu"`` / ``"npu:N"``), with ``HostMemory``'s
    interface; what has no device equivalent (``view``: NumPy over the memory itself) says so."""

    def __init__(self, device: str):
        self.device = device
        self.device_id = int(device.partition(":")[2] or 0)
        self._sessions: dict[tuple[str, int], ort.InferenceSession] = {}

    def check(self) -> None:
        """Raises naming the device when this ONNX Runtime cannot reach it or it is not there."""
        device_providers(self.device)
        self._session("copy", onnx.TensorProto.FLOAT)

    def _session(self, kind: str, element: int) -> ort.InferenceSession:
        key = (kind, element)
        if key not in self._sessions:
            model = _MODELS[kind](element)
            try:
                session = make_session(model, providers=ascend_providers(self.device_id)).ort
            except Exception as error:  # the EP refused the device, then the CPU the NPU's ops
                raise RuntimeError(f"device {self.device!r} is not there: {error}") from None
            check_device(session, self.device)
            self._sessions[key] = session
        return self._sessions[key]

    def copy_into(self, source: ort.OrtValue, target: ort.OrtValue | str) -> ort.OrtValue:
        """``source`` copied into ``target`` (a value, or ``"cann"`` / ``"cpu"`` for a new one)."""
        session = self._session("copy", elem_type(source.data_type()))
        binding = session.io_binding()
        binding.bind_ortvalue_input("x", source)
        if isinstance(target, str):
            binding.bind_output("y", target, self.device_id if target == "cann" else 0)
        else:
            binding.bind_ortvalue_output("y", target)
        session.run_with_iobinding(binding)
        return binding.get_outputs()[0] if isinstance(target, str) else target

    def copy(self, array: np.ndarray) -> ort.OrtValue:
        """``array`` uploaded into device memory of its own."""
        return self.copy_into(HOST.wrap(np.ascontiguousarray(array)), "cann")

    def wrap(self, array: np.ndarray) -> ort.OrtValue:
        """A host value (a batch): ONNX Runtime moves it to the device for the nodes that read it
        there, once per run, and the host nodes read it where it is."""
        return HOST.wrap(array)

    def scalar(self, value: float | int, dtype, shape: tuple[int, ...] = ()) -> ort.OrtValue:
        """A host scalar (learning rate, step, loss scale): the kernels that take one read it on the
        host, the others get it copied."""
        return HOST.scalar(value, dtype, shape)

    def zeros(self, shape: Sequence[int], dtype) -> ort.OrtValue:
        """Zeros in device memory of their own, filled there."""
        session = self._session("zeros", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
        binding = session.io_binding()
        held = np.array(shape, np.int64)  # alive until the run is over (this module's doc)
        binding.bind_cpu_input("shape", held)
        binding.bind_output("y", "cann", self.device_id)
        session.run_with_iobinding(binding)
        return binding.get_outputs()[0]

    def zeros_like(self, value: ort.OrtValue) -> ort.OrtValue:
        return self.zeros(value.shape(), dtype_of(value))

    def numpy(self, value: ort.OrtValue) -> np.ndarray:
        return self.read(value)

    def read(self, value: ort.OrtValue) -> np.ndarray:
        """A host copy of a device value (or of a host one, such as a run's loss)."""
        if value.device_name().lower() == "cpu":
            return HOST.read(value)
        return HOST.numpy(self.copy_into(value, "cpu"))

    @contextlib.contextmanager
    def faults(self, what: str) -> Iterator[None]:
        """Inside the block, a refused device allocation is a ``DeviceMemoryError`` naming
        ``what`` ran, the allocation the runtime refused (its bytes, where it says them) and the
        device's free bytes against its total; the caller's state is untouched by it."""
        try:
            yield
        except _ORT_ERRORS as error:
            if not any(mark in str(error) for mark in _ALLOCATION_FAILED):
                raise
            message, free, total = _runtime_says()
            refused = _refused_bytes()
            allocation = f"an allocation of {refused:,} bytes" if refused else "an allocation"
            raise DeviceMemoryError(
                f"{self.device}: {what} ran out of device memory: the runtime refused {allocation} "
                f"({message or 'aclrtMalloc failed'}); {free:,} of {total:,} bytes are free now. Nothing "
                "was updated: the parameters and optimizer states are as they were"
            ) from None

    def readable(self, value: ort.OrtValue | Deferred) -> Deferred:
        """The value for a save: read from the device when the file reaches it, one tensor at a
        time (``checkpoint.Deferred``; one already, as ZeRO-1's gathered states are, as it is)."""
        if isinstance(value, Deferred):
            return value
        return Deferred(tuple(value.shape()), dtype_of(value), lambda: self.read(value))

    def view(self, value: ort.OrtValue) -> np.ndarray:
        raise RuntimeError(
            f"{self.device}: a value in device memory has no host view; read() copies it to the host"
        )

    def write(self, value: ort.OrtValue, array: np.ndarray) -> None:
        self.copy_into(HOST.wrap(np.ascontiguousarray(array)), value)

    def buffers(self, like: Mapping[str, ort.OrtValue], slots: Slots | None = None) -> DeviceBuffers:
        return DeviceBuffers(self, like, slots)

    def views(
        self, flat: ort.OrtValue, spans: Mapping[str, tuple[int, list[int]]]
    ) -> dict[str, ort.OrtValue]:
        """OrtValues over ``flat``'s memory: for each name, the tensor of the shape given starting
        at the element given (ONNX Runtime's Identity on the NPU writes each onto itself)."""
        element = elem_type(flat.data_type())
        itemsize = np.dtype(dtype_of(flat)).itemsize
        session = self._session("copy", element)
        views = {}
        for name, (start, shape) in spans.items():
            address = flat.data_ptr() + start * itemsize
            binding = session.io_binding()
            binding.bind_input("x", "cann", self.device_id, dtype_of(flat), shape, address)
            binding.bind_output("y", "cann", self.device_id, dtype_of(flat), shape, address)
            session.run_with_iobinding(binding)
            views[name] = binding.get_outputs()[0]
        return views

    def scale(self, value: ort.OrtValue, factor: float) -> None:
        """``value`` times ``factor`` in place, on the device."""
        session = self._session("scale", elem_type(value.data_type()))
        binding = session.io_binding()
        binding.bind_ortvalue_input("x", value)
        held = HOST.scalar(factor, np.float32)  # alive until the run is over (DeviceMemory's doc)
        binding.bind_ortvalue_input("factor", held)
        binding.bind_ortvalue_output("y", value)
        session.run_with_iobinding(binding)


class DeviceBuffers:
    """``Buffers`` in device memory: one flat buffer per element type, each view an OrtValue over
    its span of it (``views``, ``spans``, ``flat`` as the host's)."""

    def __init__(self, memory: DeviceMemory, like: Mapping[str, ort.OrtValue], slots: Slots | None = None):
        self.memory = memory
        self.slots = slots
        self.views: dict[str, ort.OrtValue] = {}
        self.spans: dict[str, tuple[int, int, int]] = {}
        self.flat: list[ort.OrtValue] = []
        for dtype, length, spans in laid_out(like, slots):
            flat = memory.zeros([max(length, 1)], dtype)
            self.flat.append(flat)
            self.views |= memory.views(flat, spans)
            for name, (start, shape) in spans.items():
                self.spans[name] = (len(self.flat) - 1, start, int(np.prod(shape, dtype=np.int64)))

    def host_arrays(self) -> list[np.ndarray]:
        raise RuntimeError(
            f"{self.memory.device}: the gradients live in device memory, where HCCL exchanges them "
            "(DataParallel.reduce_device_gradients); they have no host arrays"
        )

    def scale(self, factor: float) -> None:
        for flat in self.flat:
            self.memory.scale(flat, factor)

    def copy_from(self, values: Mapping[str, ort.OrtValue]) -> None:
        for name, view in self.views.items():
            self.memory.copy_into(values[name], view)
