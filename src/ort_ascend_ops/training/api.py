"""onnxruntime-training's training API (``CheckpointState``, ``Module``, ``Optimizer``,
``LinearLRScheduler``) over current ONNX Runtime, for the artifacts of ``generate_artifacts``.

Parameters, gradients and optimizer states are OrtValues in ONNX Runtime's memory that the
sessions read and write through IOBinding: nothing goes through NumPy between steps. AdamW updates
them in place (``optim.in_place``), SGD by writing each update into the buffer it replaces
(``optim.OWN_BUFFERS``); AdamW under ``native=False`` or session options of the user's writes into
a second buffer that then takes the first one's place, so each updated value costs twice its size."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from ..autodiff import grad_name
from ..opschema import elem_type
from ..runtime import (
    _as_numpy,
    check_device,
    device_providers,
    make_session,
    ortvalue_copy,
    ortvalue_memory,
    ortvalue_view,
    session_options,
)
from . import distributed
from .artifacts import pruned
from .buffers import Buffers
from .checkpoint import Contents, check_property, read, write
from .optim import (
    FOUND_BEFORE,
    FOUND_INF,
    INV_SCALE,
    LEARNING_RATE,
    MAX_NORM,
    OWN_BUFFERS,
    STEP,
    TOTAL_NORM,
    UPDATED_ELEMENTS,
    clip_model,
    from_metadata,
    in_place,
    optimizer_model,
    state_name,
    unscale_model,
    updated,
)
from .precision import LOSS_SCALE, LossScaling


def _elem_type(value: ort.OrtValue) -> int:
    return elem_type(value.data_type())


def _dtype(value: ort.OrtValue) -> np.dtype:
    """The value's NumPy dtype, read without copying the tensor out."""
    return np.dtype(helper.tensor_dtype_to_np_dtype(_elem_type(value)))


def _zeros_like(value: ort.OrtValue) -> ort.OrtValue:
    return ortvalue_copy(np.zeros(value.shape(), _dtype(value)))


class Parameter:
    """One parameter of a ``CheckpointState``: ``data`` and ``grad`` read as NumPy copies;
    assigning ``data`` copies into the parameter's buffer."""

    def __init__(self, name: str, value: ort.OrtValue, requires_grad: bool):
        self.name = name
        self.requires_grad = requires_grad
        self._value = value
        self._grad: ort.OrtValue | None = None

    # OrtValue.numpy() shares the buffer, which steps and accumulations now write in place.
    @property
    def data(self) -> np.ndarray:
        return _as_numpy(self._value).copy()

    @data.setter
    def data(self, array: np.ndarray) -> None:
        shape, dtype = self._value.shape(), _dtype(self._value)
        array = np.asarray(array)
        if list(array.shape) != shape or array.dtype != dtype:
            raise ValueError(
                f"parameter '{self.name}' is {dtype}{shape}; got {array.dtype}{list(array.shape)}"
            )
        self._value.update_inplace(np.ascontiguousarray(array))

    def view(self) -> np.ndarray:
        """The parameter's buffer itself as NumPy (bfloat16's a copy), valid until the next step
        writes it: for a caller that copies it anyway (a save), without a copy of its own."""
        return _as_numpy(self._value)

    @property
    def grad(self) -> np.ndarray | None:
        """The gradient the module last computed or accumulated; None before its first call."""
        return None if self._grad is None else _as_numpy(self._grad).copy()

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


class CheckpointState:
    """The training state: parameters (and their gradients), properties and, once an
    ``Optimizer`` runs, its step, learning rate and per-parameter states."""

    def __init__(self, contents: Contents):
        self.parameters = Parameters(
            {
                name: Parameter(name, ortvalue_copy(array), contents.requires_grad[name])
                for name, array in contents.parameters.items()
            }
        )
        self.properties = Properties()
        self.properties.update(contents.properties)
        self._optimizer = dict(contents.optimizer) if contents.optimizer is not None else None
        self._optimizer_states = {
            state: {name: ortvalue_copy(a) for name, a in arrays.items()}
            for state, arrays in contents.optimizer_states.items()
        }
        self._loss_scale = dict(contents.loss_scale) if contents.loss_scale is not None else None

    @classmethod
    def load_checkpoint(cls, checkpoint_uri: str | os.PathLike) -> CheckpointState:
        return cls(read(checkpoint_uri))

    @staticmethod
    def save_checkpoint(
        state: CheckpointState, checkpoint_uri: str | os.PathLike, include_optimizer_state: bool = False
    ) -> None:
        """Writes the state atomically: a process killed during the save leaves the previous
        file at ``checkpoint_uri`` whole. The tensors are written from ONNX Runtime's buffers
        themselves, with no copy."""
        contents = Contents(
            parameters={name: p.view() for name, p in state.parameters.items()},
            requires_grad={name: p.requires_grad for name, p in state.parameters.items()},
            properties=dict(state.properties),
            loss_scale=dict(state._loss_scale) if state._loss_scale is not None else None,
        )
        if include_optimizer_state and state._optimizer is not None:
            contents.optimizer = dict(state._optimizer)
            contents.optimizer_states = {
                s: {name: _as_numpy(v) for name, v in values.items()}
                for s, values in state._optimizer_states.items()
            }
        write(checkpoint_uri, contents)


def _as_ortvalue(value) -> ort.OrtValue:
    return value if isinstance(value, ort.OrtValue) else ortvalue_view(np.asarray(value))


def training_session_options(*, threads: int | None = None, native: bool = True) -> ort.SessionOptions:
    """``session_options`` for the training API's sessions: a step runs the training session, then
    the optimizer's (and the eval's), so a thread pool left spinning after one takes the cores the
    next one needs (measured 2x slower steps on two threads). Spinning is off. So is ONNX
    Runtime's memory pattern: its one block for a run's activations comes on top of the arena
    chunks the first run of each shape grew, which the arena keeps (a Llama's step at S=1024:
    peak 4360 MB with it, 2902 MB without, and no slower; docs/PERFORMANCE.md)."""
    options = session_options(threads=threads, native=native)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.enable_mem_pattern = False
    return options


def _session(
    model: onnx.ModelProto,
    threads: int | None,
    native: bool,
    options: ort.SessionOptions | None,
    device: str = "cpu",
) -> ort.InferenceSession:
    session = make_session(
        model,
        native=native,
        options=options or training_session_options(threads=threads, native=native),
        providers=device_providers(device),
    ).ort
    check_device(session, device)
    return session


class _Program:
    """A training or eval model bound to a state: which inputs the user gives, which are
    parameters, which outputs are the user's and which gradients."""

    def __init__(self, uri, state: CheckpointState, threads, native, options, device):
        self.model = onnx.load(uri) if not isinstance(uri, onnx.ModelProto) else uri
        self.session = _session(self.model, threads, native, options, device)
        inputs = [i.name for i in self.session.get_inputs()]
        self.parameters = [n for n in inputs if n in state.parameters]
        self.scaled = LOSS_SCALE in inputs  # fp16-mixed's training model
        self.user_inputs = [n for n in inputs if n not in state.parameters and n != LOSS_SCALE]
        outputs = [o.name for o in self.session.get_outputs()]
        self.grads = {p: grad_name(p) for p in self.parameters if grad_name(p) in outputs}
        self.user_outputs = [o for o in outputs if o not in set(self.grads.values())]
        frozen_with_grad = [p for p in self.grads if not state.parameters[p].requires_grad]
        if frozen_with_grad:
            raise ValueError(
                f"the checkpoint freezes {frozen_with_grad}, which the training model differentiates"
            )

    def bind(self, state: CheckpointState, user_inputs: Sequence) -> ort.IOBinding:
        if len(user_inputs) != len(self.user_inputs):
            raise ValueError(
                f"the model takes {len(self.user_inputs)} inputs {self.user_inputs}, got {len(user_inputs)}"
            )
        binding = self.session.io_binding()
        for name, value in zip(self.user_inputs, user_inputs, strict=True):
            binding.bind_ortvalue_input(name, _as_ortvalue(value))
        for name in self.parameters:
            binding.bind_ortvalue_input(name, state.parameters[name]._value)
        for name in self.user_outputs:
            binding.bind_output(name, "cpu")
        return binding

    def results(self, binding: ort.IOBinding):
        values = [_as_numpy(v) for v in binding.get_outputs()[: len(self.user_outputs)]]
        return values[0] if len(values) == 1 else values


def _accumulation_model(types: Sequence[onnx.TypeProto]) -> onnx.ModelProto:
    """a_i + b_i for every gradient buffer: the accumulation of one micro-batch's gradients."""
    nodes, inputs, outputs = [], [], []
    for i, value_type in enumerate(types):
        nodes.append(helper.make_node("Add", [f"a{i}", f"b{i}"], [f"sum{i}"]))
        inputs += [helper.make_value_info(f"a{i}", value_type), helper.make_value_info(f"b{i}", value_type)]
        outputs.append(helper.make_value_info(f"sum{i}", value_type))
    graph = helper.make_graph(nodes, "accumulate", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


class Module:
    """The training (and eval) model over a ``CheckpointState``. Each training call computes the
    loss and the gradients and adds them to those of the calls since ``lazy_reset_grad`` (or
    since the start), as onnxruntime-training's Module does: call ``lazy_reset_grad`` after each
    optimizer step. ``threads``: ONNX Runtime's intra-op threads; ``native=False`` runs the
    reference functions instead of the native library. ``session_options`` (to turn on ONNX
    Runtime's profiler, say) get the library registered unless ``native=False``.

    A training model of ``precision="fp16-mixed"`` runs with a loss scale (``loss_scaling``:
    ``torch.amp.GradScaler``'s rules, its defaults unless given; the scale lives in the
    checkpoint): the call returns the unscaled loss and leaves unscaled gradients, and the
    ``Optimizer`` skips a step whose gradients overflowed.

    ``device``: ``"cpu"``, or ``"npu"`` / ``"npu:N"``, where the training and eval sessions and the
    optimizer's run on the CANN execution provider (our nodes as its aclnn kernels, in the graph's
    precision; other nodes where ONNX Runtime places them). Parameters, gradients and states stay
    in host memory, copied to the device and back by ONNX Runtime each run.

    Data parallel, as torch's ``DistributedDataParallel``: with ``process_group`` given, or
    torch.distributed's default group once it is initialized, every rank starts from rank 0's
    state (parameters, properties, loss scale: broadcast here) after the ranks checked they run
    the same model and package versions, and each training call ends with the gradients averaged
    over the ranks (``distributed``'s buckets), fp16-mixed's overflow flag shared, so that every
    rank takes the same step. Inside ``no_sync()`` the calls accumulate locally; the first call
    after it averages what they accumulated. Under an ``Optimizer(..., zero=1)`` the gradients
    are reduce-scattered instead: a rank's ``Parameter.grad`` is then the mean over the ranks for
    the parameters it updates (``Optimizer.owned``) and its own for the others."""

    def __init__(
        self,
        train_model_uri,
        state: CheckpointState,
        eval_model_uri=None,
        device: str = "cpu",
        *,
        threads: int | None = None,
        native: bool = True,
        session_options: ort.SessionOptions | None = None,
        loss_scaling: LossScaling | None = None,
        process_group=None,
    ):
        device_providers(device)  # an unknown or absent device named before any work
        self._state, self._device = state, device
        self._threads, self._native, self._options = threads, native, session_options
        self._train = _Program(train_model_uri, state, threads, native, session_options, device)
        self._eval = (
            _Program(eval_model_uri, state, threads, native, session_options, device)
            if eval_model_uri
            else None
        )
        self._training = True
        self._reset_pending = True
        self._adder: ort.InferenceSession | None = None
        # The gradients, and the next micro-batch's while they accumulate: made on the first
        # training call, each a Buffers of one buffer per element type.
        self._grads: Buffers | None = None
        self._scratch: Buffers | None = None
        self._first_call = True
        self._clippers: dict[tuple, ort.InferenceSession] = {}  # clip_grad_norm_'s sessions
        self._scaling = None
        if self._train.scaled:
            self._scaling = loss_scaling or LossScaling()
            if state._loss_scale is None:
                state._loss_scale = {"scale": float(self._scaling.init_scale), "growth_tracker": 0}
        elif loss_scaling is not None:
            raise ValueError("loss_scaling: this training model takes no loss scale (fp16-mixed's does)")
        self._found_inf = False  # since the gradients were last reset
        self._unscaler: ort.InferenceSession | None = None
        self._ranks = distributed.current(process_group)
        self._shards: distributed.Shards | None = None  # ZeRO stage 1's, set by its Optimizer
        self._sync = True
        if self._ranks is not None:
            self._start_from_rank0()

    def _start_from_rank0(self) -> None:
        ranks, state = self._ranks, self._state
        assert ranks is not None
        shapes = {p: (_dtype(v._value).name, *v._value.shape()) for p, v in state.parameters.items()}
        graph = self._train.model.graph
        ranks.agree(
            {
                "the parameters (names, types and shapes)": str(sorted(shapes.items())),
                "the training model's inputs": str(self._train.user_inputs),
                "the training model's nodes": hashlib.sha256(
                    " ".join(f"{n.domain}::{n.op_type}" for n in graph.node).encode()
                ).hexdigest()[:16],
                **distributed.versions(),
            }
        )
        views = [ortvalue_memory(p._value) for p in state.parameters.values()]
        ranks.broadcast(views, [0] * len(views), "the parameters' broadcast from rank 0")
        properties, scale = ranks.from_rank0((dict(state.properties), state._loss_scale), "rank 0's state")
        state.properties.clear()
        state.properties.update(properties)
        state._loss_scale = scale

    @property
    def ranks(self) -> distributed.Ranks | None:
        """The processes this module averages its gradients over; None in one process."""
        return self._ranks

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Training calls inside accumulate their gradients on this rank alone (the micro-batches
        before the last of a step), as DDP's ``no_sync``."""
        previous, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = previous

    def train(self, mode: bool = True) -> Module:
        self._training = mode
        return self

    def eval(self) -> Module:
        if self._eval is None:
            raise RuntimeError("this Module has no eval model (pass eval_model_uri)")
        return self.train(False)

    @property
    def training(self) -> bool:
        return self._training

    @property
    def training_session(self) -> ort.InferenceSession:
        """The training model's ONNX Runtime session (to end its profiling, say)."""
        return self._train.session

    def _program(self) -> _Program:
        """The program of the current mode (``eval()`` has checked there is an eval model)."""
        program = self._train if self._training else self._eval
        if program is None:
            raise RuntimeError("this Module has no eval model (pass eval_model_uri)")
        return program

    def input_names(self) -> list[str]:
        return list(self._program().user_inputs)

    def output_names(self) -> list[str]:
        return list(self._program().user_outputs)

    def lazy_reset_grad(self) -> None:
        """The next training call overwrites the gradients instead of adding to them."""
        self._reset_pending = True

    def __call__(self, *user_inputs):
        """The loss (a NumPy float32 scalar; a list when the model has more outputs)."""
        program = self._program()
        binding = program.bind(self._state, user_inputs)
        if not self._training:
            program.session.run_with_iobinding(binding)
            return program.results(binding)
        accumulate = not self._reset_pending
        grads = self._gradient_buffers()
        if self._first_call:  # Parameter.grad is None until then, even where the buffers exist
            for p, view in grads.views.items():
                self._state.parameters[p]._grad = view
            self._first_call = False
        if accumulate and self._scratch is None:
            self._scratch = Buffers(grads.views)
        targets = self._scratch if accumulate else grads
        assert targets is not None
        for p, grad in program.grads.items():
            binding.bind_ortvalue_output(grad, targets.views[p])
        if program.scaled:
            assert self._state._loss_scale is not None  # set with the module's loss scaling
            # Each rank seeds its backward with scale / N, as Apex's and Horovod's gradient
            # predivision does: its float16 values are then those of its rows in the one process
            # of N times its batch, so it overflows where that process would, not N times sooner.
            ranks = 1 if self._ranks is None else self._ranks.size
            scale = np.array(self._state._loss_scale["scale"] / ranks, np.float32)
            binding.bind_ortvalue_input(LOSS_SCALE, ortvalue_copy(scale))
        program.session.run_with_iobinding(binding)
        if program.scaled:
            self._found_inf = self._unscale(targets, 1.0 / float(scale), accumulate and self._found_inf)
        if accumulate:
            self._accumulate()
        self._reset_pending = False
        if self._ranks is not None and self._sync:
            self._synchronize(grads, program.scaled)
        return program.results(binding)

    def _gradient_buffers(self) -> Buffers:
        """The gradients' buffers, made on first use (the first training call, or a ZeRO
        optimizer that splits them)."""
        if self._grads is None:
            self._grads = Buffers({p: self._state.parameters[p]._value for p in self._train.grads})
        return self._grads

    def _synchronize(self, grads: Buffers, scaled: bool) -> None:
        """The gradients averaged over the ranks (reduce-scattered under ZeRO stage 1), and
        fp16-mixed's overflow flag set where any rank's gradients overflowed."""
        assert self._ranks is not None
        found = self._found_inf if scaled else None
        if self._shards is None:
            found = self._ranks.average(grads.arrays, found)
        else:
            found = self._ranks.reduce_scatter(grads.arrays, self._shards, found)
        self._found_inf = bool(found) if scaled else self._found_inf

    def _clipper(self, norm_type: float, grads: dict[str, ort.OrtValue], part: str) -> ort.InferenceSession:
        """``clip_grad_norm_``'s session over ``grads`` (``optim.clip_model``'s ``part``)."""
        key = (norm_type, tuple(grads), part)
        if key not in self._clippers:
            model = clip_model(_float_types(grads.values()), norm_type, part)
            self._clippers[key] = _session(model, self._threads, False, self._options)
        return self._clippers[key]

    def scale_grads(self, factor: float) -> None:
        """Multiplies every gradient by ``factor`` where it lies (1/N averages N accumulated
        micro-batches, as transformers' Trainer divides each one's loss by N)."""
        for array in self._grads.arrays if self._grads is not None else []:
            np.multiply(array, array.dtype.type(factor), out=array)

    def _unscale(self, grads: Buffers, inv_scale: float, found_before: bool) -> bool:
        """Divides every gradient by the loss scale where it lies, one node per gradient buffer;
        whether any overflowed, or ``found_before``."""
        if not grads.flat:
            return found_before
        if self._unscaler is None:
            types = [helper.make_tensor_type_proto(_elem_type(g), g.shape()) for g in grads.flat]
            self._unscaler = _session(unscale_model(types), self._threads, self._native, self._options)
        binding = self._unscaler.io_binding()
        binding.bind_ortvalue_input(INV_SCALE, ortvalue_copy(np.array([inv_scale], np.float32)))
        binding.bind_ortvalue_input(FOUND_BEFORE, ortvalue_copy(np.array([float(found_before)], np.float32)))
        binding.bind_output(FOUND_INF)
        for i, flat in enumerate(grads.flat):
            binding.bind_ortvalue_input(f"g{i}", flat)
            binding.bind_ortvalue_output(f"unscaled{i}", flat)
        self._unscaler.run_with_iobinding(binding)
        return bool(binding.get_outputs()[0].numpy()[0])

    def _accumulate(self) -> None:
        """Adds the micro-batch's gradients to the others: the scratch buffers are laid out as the
        gradients' (made from them), so one elementwise Add per buffer, written where it reads
        (as SGD's update does: optim.py's doc)."""
        assert self._grads is not None and self._scratch is not None
        if self._adder is None:
            types = [helper.make_tensor_type_proto(_elem_type(g), g.shape()) for g in self._grads.flat]
            self._adder = _session(_accumulation_model(types), self._threads, False, self._options)
        binding = self._adder.io_binding()
        for i, (grads, scratch) in enumerate(zip(self._grads.flat, self._scratch.flat, strict=True)):
            binding.bind_ortvalue_input(f"a{i}", grads)
            binding.bind_ortvalue_input(f"b{i}", scratch)
            binding.bind_ortvalue_output(f"sum{i}", grads)
        self._adder.run_with_iobinding(binding)

    def export_model_for_inferencing(self, inference_model_uri, graph_output_names: Sequence[str]) -> None:
        """Writes the eval model computing ``graph_output_names`` (outputs or inner values), the
        parameters' current values as its initializers, the inputs it no longer needs removed."""
        if self._eval is None:
            raise RuntimeError("exporting needs the eval model (pass eval_model_uri)")
        model = pruned(self._eval.model, list(graph_output_names))
        graph = model.graph
        parameters = [i for i in graph.input if i.name in self._state.parameters]
        for value in parameters:
            graph.input.remove(value)
            graph.initializer.append(
                onnx.numpy_helper.from_array(self._state.parameters[value.name].data, value.name)
            )
        onnx.checker.check_model(model)
        onnx.save(model, Path(inference_model_uri))


ZERO_STAGES = (0, 1)


def _rehomed(state: CheckpointState, grads: Buffers) -> Buffers:
    """The parameters moved into buffers laid out as their gradients ``grads``, so that each
    rank's run of them is one collective."""
    flat = Buffers(grads.views)
    for p, view in flat.views.items():
        np.copyto(ortvalue_memory(view), ortvalue_memory(state.parameters[p]._value))
        state.parameters[p]._value = view
    return flat


class Optimizer:
    """Runs the optimizer model over the module's trainable parameters. The learning rate starts
    at the optimizer's default (``lr`` of ``optim.AdamW`` or ``optim.SGD`` given to
    ``generate_artifacts``) unless the checkpoint holds one. ``session_options``: the module's
    unless given (to profile one session and not the other, say).

    Under a data-parallel module every rank starts from rank 0's step, learning rate and states.
    ``zero=1`` shards the states as ZeRO stage 1: each rank holds the states of, and updates, a
    contiguous run of about 1/N of the gradient buffers' elements (``distributed.Shards``,
    ``owned``), whose mean over the ranks the module reduce-scatters to it; the parameters are
    then broadcast from their owners. ``consolidated()`` gathers the states to rank 0 for a
    checkpoint, which any number of ranks resumes."""

    def __init__(
        self,
        optimizer_model_uri,
        module: Module,
        *,
        session_options: ort.SessionOptions | None = None,
        zero: int = 0,
    ):
        model = (
            onnx.load(optimizer_model_uri)
            if not isinstance(optimizer_model_uri, onnx.ModelProto)
            else optimizer_model_uri
        )
        self.options = from_metadata(model)
        self._module = module
        state = module._state
        if zero not in ZERO_STAGES:
            raise ValueError(
                f"zero: the stages are {ZERO_STAGES} (1 shards the optimizer states), got {zero}"
            )
        ranks = module._ranks
        trained = [p for p in state.parameters.keys() if p in {i.name for i in model.graph.input}]
        untrained = [p for p in module._train.grads if p not in trained]
        if untrained:
            raise ValueError(f"the optimizer model does not update {untrained}")
        self._trained = trained
        self._owners = [0] * len(trained)  # the rank that updates each of them
        self._flat: Buffers | None = None  # ZeRO's parameters, laid out as their gradients
        if zero and ranks is not None:
            grads = module._gradient_buffers()
            shards = distributed.Shards.of(grads, ranks.size)
            module._shards = shards
            self._owners = [shards.owners.get(p, 0) for p in trained]
            self._flat = _rehomed(state, grads)
        rank = ranks.rank if ranks is not None else 0
        self._names = [p for p, o in zip(trained, self._owners, strict=True) if o == rank or not self.zero]
        if self.zero and self._names:
            types = {i.name: i.type for i in model.graph.input}
            model = optimizer_model({p: types[p] for p in self._names}, self.options)
        options = session_options or module._options
        # In place needs our kernel's alias map and sequential execution: our own options, on the
        # CPU. On a device the inputs are copied there before a node runs, so every update may be
        # written back into the host buffer it replaces.
        on_cpu = module._device == "cpu"
        self._in_place = in_place(model) if module._native and options is None and on_cpu else None
        self._own_buffers = self._in_place is None and (type(self.options) in OWN_BUFFERS or not on_cpu)
        # A rank owning nothing (more ranks than parameters) runs no session.
        self._session = (
            _session(self._in_place or model, module._threads, module._native, options, module._device)
            if self._names
            else None
        )
        if state._optimizer is None:
            state._optimizer = {"step": 0, "learning_rate": float(self.options.lr)}
        if ranks is not None:
            state._optimizer = ranks.from_rank0(state._optimizer, "rank 0's optimizer step")
        # The checkpoint's optimizer scalars, updated in place.
        self._scalars: dict = state._optimizer
        held = all(p in state._optimizer_states.get(s, {}) for s in self.options.states for p in trained)
        for s in self.options.states:
            values = state._optimizer_states.setdefault(s, {})
            for p in self._names:
                if p not in values:
                    values[p] = _zeros_like(state.parameters[p]._value)
                elif values[p].shape() != state.parameters[p]._value.shape():
                    raise ValueError(f"the checkpoint's {s} of '{p}' is shaped {values[p].shape()}")
        if ranks is not None:
            self._states_from_rank0(ranks, held)
        self._spare: dict[tuple[str, str], ort.OrtValue] = {}

    def _states_from_rank0(self, ranks: distributed.Ranks, held: bool) -> None:
        """Every rank's states set to rank 0's (a resumed checkpoint's), each on the rank that
        owns it; rank 0 then keeps its own shard alone."""
        states = self._module._state._optimizer_states
        if not ranks.from_rank0(held, "rank 0's optimizer states"):
            return  # a fresh start: zeros everywhere
        what = "the optimizer states' scatter from rank 0"
        for s in self.options.states:
            for p, owner in zip(self._trained, self._owners, strict=True):
                if not self.zero:
                    ranks.broadcast([ortvalue_memory(states[s][p])], [0], what)
                elif owner != 0 and ranks.rank == 0:
                    ranks.send_to(ortvalue_memory(states[s].pop(p)), owner, what)
                elif owner != 0 and ranks.rank == owner:
                    ranks.receive_from(ortvalue_memory(states[s][p]), 0, what)

    @property
    def zero(self) -> int:
        """1 when the optimizer states are sharded over the ranks (ZeRO stage 1), else 0."""
        return int(self._module._shards is not None)

    @property
    def owned(self) -> list[str]:
        """The parameters this rank updates and holds the states of (all of them but under ZeRO
        stage 1)."""
        return list(self._names)

    @contextlib.contextmanager
    def consolidated(self) -> Iterator[None]:
        """Under ZeRO stage 1, rank 0 holds every rank's optimizer states inside (to save a
        checkpoint any number of ranks resumes), as ``ZeroRedundancyOptimizer.consolidate_state_dict``
        gathers them; every rank enters it, and rank 0's extra states are gone after it."""
        ranks = self._module._ranks
        if not self.zero or ranks is None:
            yield
            return
        states, parameters = self._module._state._optimizer_states, self._module._state.parameters
        gathered = []
        what = "the optimizer states' gather to rank 0"
        for s in self.options.states:
            for p, owner in zip(self._trained, self._owners, strict=True):
                if owner == 0:
                    continue
                if ranks.rank == owner:
                    ranks.send_to(ortvalue_memory(states[s][p]), 0, what)
                elif ranks.rank == 0:
                    states[s][p] = _zeros_like(parameters[p]._value)
                    ranks.receive_from(ortvalue_memory(states[s][p]), owner, what)
                    gathered.append((s, p))
        try:
            yield
        finally:
            for s, p in gathered:
                del states[s][p]

    @property
    def session(self) -> ort.InferenceSession | None:
        """The optimizer model's ONNX Runtime session (None on a ZeRO rank that owns nothing)."""
        return self._session

    @property
    def step_count(self) -> int:
        """Steps taken, those of the run a checkpoint resumes included."""
        return int(self._scalars["step"])

    def set_learning_rate(self, learning_rate: float) -> None:
        self._scalars["learning_rate"] = float(learning_rate)

    def get_learning_rate(self) -> float:
        return float(self._scalars["learning_rate"])

    @property
    def updates_in_place(self) -> bool:
        """Whether a step writes parameters and states into their own buffers (see the module's
        doc) rather than into a second one."""
        return self._in_place is not None or self._own_buffers

    def get_loss_scale(self) -> float:
        """The loss scale of the next step (fp16-mixed); 1.0 for a model without loss scaling, as
        a disabled ``GradScaler`` gives."""
        scale = self._module._state._loss_scale
        return float(scale["scale"]) if self._module._scaling is not None and scale else 1.0

    def step(self) -> bool:
        """One update of every trainable parameter from its current gradient; False (nothing
        updated, the step count kept) when under fp16-mixed a gradient overflowed since the last
        reset, the loss scale then backed off, as ``GradScaler.step`` and ``update`` do."""
        module, scale = self._module, self._module._state._loss_scale
        if module._scaling is not None and scale is not None and module._found_inf:
            module._scaling.update(scale, found_inf=True)
            return False
        self._update()
        if module._scaling is not None and scale is not None:
            module._scaling.update(scale, found_inf=False)
        return True

    def _update(self) -> None:
        if self._session is not None:
            self._update_own()
        ranks = self._module._ranks
        if self._flat is not None:  # set under ZeRO stage 1 alone
            assert ranks is not None and self._module._shards is not None
            ranks.all_gather(self._flat.arrays, self._module._shards)
        self._scalars["step"] = self.step_count + 1

    def _update_own(self) -> None:
        state = self._module._state
        assert self._session is not None
        binding = self._session.io_binding()
        binding.bind_ortvalue_input(
            LEARNING_RATE, ortvalue_copy(np.array(self.get_learning_rate(), np.float32))
        )
        binding.bind_ortvalue_input(STEP, ortvalue_copy(np.array(self.step_count + 1, np.int64)))
        for p in self._names:
            parameter = state.parameters[p]
            if parameter._grad is None:
                raise RuntimeError(f"no gradient for '{p}' yet: run the module before the optimizer")
            binding.bind_ortvalue_input(p, parameter._value)
            binding.bind_ortvalue_input(grad_name(p), parameter._grad)
            for s in self.options.states:
                binding.bind_ortvalue_input(state_name(p, s), state._optimizer_states[s][p])
        if self._in_place is not None:
            binding.bind_output(UPDATED_ELEMENTS)
            self._session.run_with_iobinding(binding)
        elif self._own_buffers:
            self._step_into(binding, lambda name, state, value: value)
        else:
            self._step_into_spares(binding)

    def _step_into(self, binding: ort.IOBinding, buffer_of) -> None:
        """Runs the functional model, each updated value written into ``buffer_of(parameter,
        state or "", its current value)``."""
        assert self._session is not None
        state = self._module._state
        for p in self._names:
            binding.bind_ortvalue_output(updated(p), buffer_of(p, "", state.parameters[p]._value))
            for s in self.options.states:
                value = state._optimizer_states[s][p]
                binding.bind_ortvalue_output(updated(state_name(p, s)), buffer_of(p, s, value))
        self._session.run_with_iobinding(binding)

    def _step_into_spares(self, binding: ort.IOBinding) -> None:
        state = self._module._state
        self._step_into(binding, self._spare_of)
        for p in self._names:
            parameter = state.parameters[p]
            if self._flat is not None:  # ZeRO's parameters stay where the all-gather sends them
                np.copyto(ortvalue_memory(parameter._value), ortvalue_memory(self._spare[(p, "")]))
            else:
                parameter._value, self._spare[(p, "")] = self._spare[(p, "")], parameter._value
            for s in self.options.states:
                values = state._optimizer_states[s]
                values[p], self._spare[(p, s)] = self._spare[(p, s)], values[p]

    def _spare_of(self, name: str, state: str, like: ort.OrtValue) -> ort.OrtValue:
        if (name, state) not in self._spare:
            self._spare[(name, state)] = _zeros_like(like)
        return self._spare[(name, state)]


class LinearLRScheduler:
    """Linear warm-up from 0 to ``initial_lr`` over ``warmup_step_count`` steps, then linear
    decay to 0 at ``total_step_count``, a function of the optimizer's step count (so a resumed
    run continues the schedule): call ``step()`` after each ``optimizer.step()``."""

    def __init__(
        self, optimizer: Optimizer, warmup_step_count: int, total_step_count: int, initial_lr: float
    ):
        self._optimizer = optimizer
        self.warmup_step_count, self.total_step_count = int(warmup_step_count), int(total_step_count)
        self.initial_lr = float(initial_lr)
        optimizer.set_learning_rate(self.learning_rate(optimizer.step_count))

    def learning_rate(self, step: int) -> float:
        if step < self.warmup_step_count:
            return self.initial_lr * step / max(1, self.warmup_step_count)
        remaining = self.total_step_count - step
        return self.initial_lr * max(0.0, remaining / max(1, self.total_step_count - self.warmup_step_count))

    def step(self) -> None:
        self._optimizer.set_learning_rate(self.learning_rate(self._optimizer.step_count))


def clip_grad_norm_(module: Module, max_norm: float, norm_type: float = 2.0) -> float:
    """``torch.nn.utils.clip_grad_norm_`` over ``module``'s gradients (``error_if_nonfinite=False``):
    the ``norm_type`` norm (2, inf or any p > 0) of every gradient's norm, returned; each gradient
    scaled in its own buffer by ``max_norm / (norm + 1e-6)`` where that is below 1. One session
    (built once per norm type) reads every gradient once for its norm and once to scale it. Under
    ZeRO stage 1 each rank holds the mean of its own share of the gradients only: the norm is
    combined over the ranks from each one's, and each rank scales its share."""
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be positive (2, inf or p > 0), got {norm_type}")
    parameters = module._state.parameters
    grads = {n: g for n in module._train.grads if (g := parameters[n]._grad) is not None}
    grads = {n: g for n, g in grads.items() if int(np.prod(g.shape(), dtype=np.int64))}
    if not grads:
        raise RuntimeError("clip_grad_norm_: no gradients yet: run the module first")
    ranks, shards = module._ranks, module._shards
    if ranks is None or shards is None:
        clipper = module._clipper(norm_type, grads, "both")
        total = _rewrite_gradients(clipper, grads, {MAX_NORM: max_norm}, "clipped", TOTAL_NORM)
        assert total is not None
        return total
    own = {n: g for n, g in grads.items() if shards.owners[n] == ranks.rank}
    local = (
        _rewrite_gradients(module._clipper(norm_type, own, "norm"), own, {}, None, TOTAL_NORM) if own else 0.0
    )
    assert local is not None
    total = ranks.norm(local, norm_type)
    if own:
        scalars = {MAX_NORM: max_norm, TOTAL_NORM: total}
        _rewrite_gradients(module._clipper(norm_type, own, "scale"), own, scalars, "clipped", None)
    return total


def _float_types(grads) -> list[onnx.TypeProto]:
    return [helper.make_tensor_type_proto(TensorProto.FLOAT, g.shape()) for g in grads]


def _rewrite_gradients(
    session: ort.InferenceSession,
    grads: dict[str, ort.OrtValue],
    scalars: dict[str, float],
    rewritten: str | None,
    result: str | None,
) -> float | None:
    """Runs one of optim's models over the gradients (``clip_model``): its float32 ``scalars``,
    each gradient as ``g<i>``, written back into its own buffer as ``<rewritten><i>``; returns
    its output ``result``."""
    binding = session.io_binding()
    for name, value in scalars.items():
        binding.bind_ortvalue_input(name, ortvalue_copy(np.array(value, np.float32)))
    if result is not None:
        binding.bind_output(result)  # the first output, as get_outputs() gives them
    for i, grad in enumerate(grads.values()):
        binding.bind_ortvalue_input(f"g{i}", grad)
        if rewritten is not None:
            binding.bind_ortvalue_output(f"{rewritten}{i}", grad)
    session.run_with_iobinding(binding)
    return float(binding.get_outputs()[0].numpy()) if result is not None else None
