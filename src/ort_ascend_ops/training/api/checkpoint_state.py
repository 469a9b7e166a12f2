"""The training state (onnxruntime-training's ``CheckpointState``): every parameter and its
gradient, the optimizer's step, learning rate and per-parameter states, the loss scaler and the
user's properties, as one owner.

It is also the one place that knows where these values live and the only code that reads or
writes their memory (``HostMemory``: ONNX Runtime's CPU memory, today). The module, the optimizer,
clipping and data parallel bind its OrtValues to sessions and ask it for values, copies and host
views; none of them touches an OrtValue's memory or ``data_ptr()`` itself."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from ...opschema import elem_type
from ...runtime import _as_numpy, ortvalue_copy, ortvalue_memory, ortvalue_view
from ..checkpoint import SUFFIX, Contents, check_property, loaded, reading, write
from .loss_scaler import LossScaler

# Each view of a buffer starts on a cache line, as ONNX Runtime's own allocations do.
ALIGN = 64


def dtype_of(value: ort.OrtValue) -> np.dtype:
    """The value's NumPy dtype (``ml_dtypes.bfloat16`` for bfloat16), read without the tensor."""
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type(value.data_type())))


class HostMemory:
    """Values in ONNX Runtime's CPU memory, which NumPy views in place."""

    device = "cpu"

    def copy(self, array: np.ndarray) -> ort.OrtValue:
        """A copy of ``array`` in memory ONNX Runtime allocated (aligned as a graph's tensors)."""
        return ortvalue_copy(array)

    def wrap(self, array: np.ndarray) -> ort.OrtValue:
        """``array`` itself as an OrtValue (a copy only where it is not C-contiguous, or where it
        holds strings)."""
        array = np.asarray(array)
        return _strings(array) if array.dtype.kind in "OSU" else ortvalue_view(array)

    def scalar(self, value: float | int, dtype, shape: tuple[int, ...] = ()) -> ort.OrtValue:
        return ortvalue_copy(np.full(shape, value, dtype))

    def zeros_like(self, value: ort.OrtValue) -> ort.OrtValue:
        return ortvalue_copy(np.zeros(value.shape(), dtype_of(value)))

    def numpy(self, value: ort.OrtValue) -> np.ndarray:
        """The value as NumPy, for one nothing writes again (a run's output): no copy where the
        memory can be shared."""
        return _as_numpy(value)

    def read(self, value: ort.OrtValue) -> np.ndarray:
        """A NumPy copy of the value (``OrtValue.numpy()`` shares the buffer, which steps and
        accumulations write in place)."""
        return _as_numpy(value).copy()

    def view(self, value: ort.OrtValue) -> np.ndarray:
        """NumPy over the value's own memory (bfloat16 included), valid while the value lives: for
        collectives and saves that read or write it in place."""
        return ortvalue_memory(value)

    def faults(self, what: str) -> contextlib.AbstractContextManager[None]:
        """Where ``DeviceMemory`` names a device's allocation failures: nothing to name here."""
        return contextlib.nullcontext()

    def readable(self, value: ort.OrtValue) -> np.ndarray:
        """NumPy of the value for a caller that reads it before the next step (a save): its own
        memory here, a copy from a device."""
        return self.view(value)

    def write(self, value: ort.OrtValue, array: np.ndarray) -> None:
        np.copyto(self.view(value), array)

    def buffers(self, like: Mapping[str, ort.OrtValue], slots: Slots | None = None) -> Buffers:
        return Buffers(self, like, slots)


HOST = HostMemory()


def _strings(array: np.ndarray) -> ort.OrtValue:
    """A string tensor as an OrtValue: ONNX Runtime's Python API makes none from NumPy, so a
    one-node model holding it as a constant outputs it."""
    tensor = numpy_helper.from_array(array.astype(object), "value")
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["strings"], value=tensor)],
        "strings",
        [],
        [helper.make_tensor_value_info("strings", TensorProto.STRING, array.shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    binding = session.io_binding()
    binding.bind_output("strings", "cpu")
    session.run_with_iobinding(binding)
    return binding.get_outputs()[0]


@dataclasses.dataclass(frozen=True)
class Slots:
    """ZeRO stage 1's layout on the NPU: each rank's parameters (``owners``) in a slot of its own of
    every buffer, all slots of one length, so that HCCL's reduce-scatter and all-gather, which move
    equal blocks, move each rank's run."""

    owners: Mapping[str, int]
    ranks: int


def laid_out(
    like: Mapping[str, ort.OrtValue], slots: Slots | None = None
) -> Iterator[tuple[np.dtype, int, dict[str, tuple[int, list[int]]]]]:
    """``like``'s values grouped by element type, each group end to end in one buffer with every
    value starting on ALIGN bytes (with ``slots``: in its owner's slot, each slot as long as the
    longest): per type, its dtype, the buffer's length in elements, and each name's first element
    and shape (host and device buffers alike)."""
    by_type: dict[np.dtype, list[str]] = {}
    for name, value in like.items():
        by_type.setdefault(dtype_of(value), []).append(name)
    for dtype, names in by_type.items():
        step = ALIGN // dtype.itemsize
        runs = [[n for n in names if slots.owners[n] == r] for r in range(slots.ranks)] if slots else [names]
        spans, lengths = {}, []
        for run in runs:
            length = 0
            for name in run:
                shape = list(like[name].shape())
                spans[name] = (length, shape)
                length += -(-int(np.prod(shape, dtype=np.int64)) // step) * step
            lengths.append(length)
        slot = max(lengths)
        for r, run in enumerate(runs):
            for name in run:
                start, shape = spans[name]
                spans[name] = (r * slot + start, shape)
        yield dtype, slot * len(runs), spans


class Buffers:
    """Zeroed tensors shaped and typed as ``like``'s values, by name (``views``), laid end to end
    in one buffer per element type (``flat``: 1-D OrtValues; the gaps between views stay zero),
    as torch's DDP keeps gradients as views of its buckets: a pass over all of them (the inf/NaN
    test, accumulation, a collective) is one node or call per element type. ``spans``: where each
    view lies, as (buffer index, first element, element count)."""

    def __init__(self, memory: HostMemory, like: Mapping[str, ort.OrtValue], slots: Slots | None = None):
        self.memory = memory
        self.slots = slots
        self.views: dict[str, ort.OrtValue] = {}
        self.spans: dict[str, tuple[int, int, int]] = {}
        self.flat: list[ort.OrtValue] = []
        self._arrays: list[np.ndarray] = []
        for dtype, length, spans in laid_out(like, slots):
            step = ALIGN // dtype.itemsize
            raw = np.zeros(length + step, dtype)
            skip = (-raw.ctypes.data % ALIGN) // dtype.itemsize
            buffer = raw[skip : skip + length]
            self._arrays.append(buffer)
            self.flat.append(ortvalue_view(buffer))
            for name, (start, shape) in spans.items():
                size = int(np.prod(shape, dtype=np.int64))
                self.spans[name] = (len(self._arrays) - 1, start, size)
                self.views[name] = ortvalue_view(buffer[start : start + size].reshape(shape))

    def host_arrays(self) -> list[np.ndarray]:
        """The flat buffers as NumPy over their memory, for the collectives."""
        return self._arrays

    def scale(self, factor: float) -> None:
        """Every value times ``factor``, in place."""
        for array in self._arrays:
            np.multiply(array, array.dtype.type(factor), out=array)

    def copy_from(self, values: Mapping[str, ort.OrtValue]) -> None:
        for name, view in self.views.items():
            self.memory.write(view, self.memory.view(values[name]))


class Parameter:
    """One parameter: ``data`` and ``grad`` read as NumPy copies; assigning either copies into the
    parameter's own buffer. ``value`` and ``grad_value`` are the OrtValues sessions bind."""

    def __init__(self, name: str, value: ort.OrtValue, requires_grad: bool, memory: HostMemory):
        self.name = name
        self.requires_grad = requires_grad
        self._value = value
        self._grad: ort.OrtValue | None = None
        self._memory = memory

    @property
    def value(self) -> ort.OrtValue:
        return self._value

    @property
    def grad_value(self) -> ort.OrtValue | None:
        """The gradient's OrtValue; None for a frozen parameter or before a module trains it."""
        return self._grad

    def _check(self, what: str, array) -> np.ndarray:
        shape, dtype = self._value.shape(), dtype_of(self._value)
        array = np.asarray(array)
        if list(array.shape) != shape or array.dtype != dtype:
            raise ValueError(f"{what} '{self.name}' is {dtype}{shape}; got {array.dtype}{list(array.shape)}")
        return array

    @property
    def data(self) -> np.ndarray:
        return self._memory.read(self._value)

    @data.setter
    def data(self, array: np.ndarray) -> None:
        self._memory.write(self._value, self._check("parameter", array))

    @property
    def grad(self) -> np.ndarray | None:
        """The gradient the module last computed or accumulated (zeros before its first training
        call, as onnxruntime-training's); None for a frozen parameter."""
        return None if self._grad is None else self._memory.read(self._grad)

    @grad.setter
    def grad(self, array: np.ndarray) -> None:
        if self._grad is None:
            raise ValueError(
                f"parameter '{self.name}' has no gradient: it is frozen, or no module trains it yet"
            )
        self._memory.write(self._grad, self._check("the gradient of parameter", array))

    def __repr__(self) -> str:
        return f"Parameter({self.name!r}, shape={self._value.shape()}, requires_grad={self.requires_grad})"


class Parameters:
    """The parameters by name. As in onnxruntime-training, iterating gives (name, Parameter)
    pairs and assigning an array to a name sets that parameter's data."""

    def __init__(self, parameters: dict[str, Parameter]):
        self._parameters = parameters

    def __getitem__(self, name: str) -> Parameter:
        return self._parameters[name]

    def __setitem__(self, name: str, array: np.ndarray) -> None:
        self._parameters[name].data = array

    def __contains__(self, name: object) -> bool:
        return name in self._parameters

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.items())

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()


class Properties(dict):
    """User values saved with a checkpoint (an epoch, a data position): int, float or str (a
    bool or NumPy scalar is taken as the int or float it holds, as onnxruntime-training does)."""

    def __setitem__(self, name: str, value: int | float | str) -> None:
        if isinstance(value, bool | np.integer):
            value = int(value)
        elif isinstance(value, np.floating):
            value = float(value)
        check_property(name, value)
        super().__setitem__(name, value)

    def update(self, *args, **kwargs) -> None:
        for name, value in dict(*args, **kwargs).items():
            self[name] = value


@dataclasses.dataclass
class OptimizerState:
    """The optimizer's part of the state: the steps taken, the learning rate of the next and, per
    state name (``exp_avg``, ...), each parameter's value."""

    step: int
    learning_rate: float
    values: dict[str, dict[str, ort.OrtValue]] = dataclasses.field(default_factory=dict)


def checkpoint_path(uri: str | os.PathLike) -> Path:
    """``uri``, or where it names a file that is not there, the same name with our suffix:
    ported code loads ``<dir>/checkpoint``, where ``generate_artifacts`` writes
    ``checkpoint.safetensors``."""
    path = Path(uri)
    with_suffix = path.with_name(path.name + SUFFIX)
    return with_suffix if not path.exists() and path.suffix != SUFFIX and with_suffix.exists() else path


class CheckpointState:
    """The training state (see the module's doc): ``parameters``, ``properties``, the optimizer's
    state once an ``Optimizer`` runs or a checkpoint held it, and the loss scaler of a model
    trained with one."""

    def __init__(self, contents: Contents, memory=HOST):  # HostMemory or DeviceMemory: one interface
        self.memory: HostMemory = memory
        with memory.faults("loading the checkpoint"):  # each tensor where it goes before the next is read
            self.parameters = Parameters(
                {
                    name: Parameter(name, memory.copy(loaded(t)), contents.requires_grad[name], memory)
                    for name, t in contents.parameters.items()
                }
            )
            self.optimizer_state: OptimizerState | None = None
            if contents.optimizer is not None:
                self.optimizer_state = OptimizerState(
                    contents.optimizer["step"],
                    contents.optimizer["learning_rate"],
                    {
                        s: {n: memory.copy(loaded(t)) for n, t in tensors.items()}
                        for s, tensors in contents.optimizer_states.items()
                    },
                )
        self.properties = Properties()
        self.properties.update(contents.properties)
        self.loss_scaler: LossScaler | None = None
        if contents.loss_scale is not None:
            self.loss_scaler = LossScaler()
            self.loss_scaler.load_state_dict(contents.loss_scale)

    @classmethod
    def load_checkpoint(cls, checkpoint_uri: str | os.PathLike, device: str = "cpu") -> CheckpointState:
        """The checkpoint's state in ``device``'s memory (``"npu"`` / ``"npu:N"``: each tensor goes
        from the file to the device before the next is read, so the host never holds the state;
        a ``Module`` on that device trains it where it lies)."""
        memory = HOST
        if device != "cpu":
            from .device_memory import DeviceMemory  # which builds on this module

            npu = DeviceMemory(device)
            npu.check()
            memory = npu  # type: ignore[assignment]  # HostMemory's interface
        with reading(checkpoint_path(checkpoint_uri)) as contents:
            return cls(contents, memory)

    @staticmethod
    def save_checkpoint(
        state: CheckpointState, checkpoint_uri: str | os.PathLike, include_optimizer_state: bool = False
    ) -> None:
        """Writes the state atomically: a process killed during the save leaves the previous
        file at ``checkpoint_uri`` whole. The tensors are written from their buffers themselves,
        with no copy."""
        contents = Contents(
            parameters={name: state.memory.readable(p.value) for name, p in state.parameters.items()},
            requires_grad={name: p.requires_grad for name, p in state.parameters.items()},
            properties=dict(state.properties),
            loss_scale=state.loss_scaler.state_dict() if state.loss_scaler is not None else None,
        )
        optimizer = state.optimizer_state
        if include_optimizer_state and optimizer is not None:
            contents.optimizer = {"step": optimizer.step, "learning_rate": optimizer.learning_rate}
            contents.optimizer_states = {
                s: {name: state.memory.readable(v) for name, v in values.items()}
                for s, values in optimizer.values.items()
            }
        write(checkpoint_uri, contents)

    def host_parameters(self) -> dict[str, np.ndarray]:
        """Every parameter as NumPy, for a caller that only reads it before the next step (a
        Hugging Face write-back): over its memory on the host, a copy from a device."""
        return {
            name: self.memory.read(p.value) if self.memory.device != "cpu" else self.memory.view(p.value)
            for name, p in self.parameters.items()
        }

    def move_to(self, memory) -> None:
        """Every value (parameters, optimizer states) moved into ``memory`` (a device's), which
        holds the state from now on, as ``model.to(device)`` moves a torch model's."""
        if memory is self.memory:
            return
        if any(p.grad_value is not None for p in self.parameters.values()):
            raise RuntimeError(
                "move_to: a module trains this state already; move it before making the Module"
            )
        # Every copy first, then the swap: a device that runs out of memory half way leaves the
        # state where it was, whole.
        moved = {n: memory.copy(self.memory.readable(p.value)) for n, p in self.parameters.items()}
        states = self.optimizer_state.values if self.optimizer_state is not None else {}
        moved_states = {
            s: {n: memory.copy(self.memory.readable(v)) for n, v in vs.items()} for s, vs in states.items()
        }
        for name, parameter in self.parameters.items():
            parameter._value = moved[name]
            parameter._memory = memory
        for s, values in moved_states.items():
            states[s].update(values)
        self.memory = memory

    def attach_gradients(self, names: Iterable[str], slots: Slots | None = None) -> Buffers:
        """Zeroed gradients for ``names``, laid out in one buffer per element type (in ``slots``
        where given), each becoming its parameter's ``grad``."""
        gradients = self.memory.buffers({n: self.parameters[n].value for n in names}, slots)
        for name, view in gradients.views.items():
            self.parameters[name]._grad = view
        return gradients

    def lay_out_parameters_as(self, gradients: Buffers) -> Buffers:
        """Moves the parameters of ``gradients`` into buffers laid out as those gradients (so that
        one rank's run of them is one collective under ZeRO stage 1); returns the buffers."""
        laid_out = self.memory.buffers(gradients.views, gradients.slots)
        laid_out.copy_from({n: self.parameters[n].value for n in laid_out.views})
        for name, view in laid_out.views.items():
            self.parameters[name]._value = view
        return laid_out

    def replace_parameter(self, name: str, value: ort.OrtValue) -> ort.OrtValue:
        """``value`` becomes the parameter's buffer (an optimizer's update written into a spare
        one); returns the buffer it held."""
        parameter = self.parameters[name]
        previous, parameter._value = parameter._value, value
        return previous
