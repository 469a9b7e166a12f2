"""``Module``: the training and eval models over a ``CheckpointState`` (onnxruntime-training's
``Module``). Each training call binds the state's parameters and gradient buffers to the training
session, runs it, and adds the result to the gradients of the calls since the last reset; under
a loss scaler it unscales them and tests them for inf/NaN in one pass, and under data parallel it
hands them to its ``DataParallel`` to average."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from ...autodiff import grad_name
from ...runtime import ortvalue_type
from ..artifacts import pruned
from ..gradient_buckets import buckets, gradient_sizes, with_all_reduce
from ..precision import LOSS_SCALE
from .checkpoint_state import Buffers, CheckpointState, Slots
from .data_parallel import DataParallel, versions
from .device_memory import DeviceBuffers, DeviceMemory
from .loss_scaler import LossScaler
from .sessions import SessionSettings


def _load(uri) -> onnx.ModelProto:
    return uri if isinstance(uri, onnx.ModelProto) else onnx.load(uri)


class _Program:
    """A training or eval model bound to a state: which inputs the user gives, which are
    parameters, which outputs are the user's and which gradients. Its session: one on the CPU,
    one per shape of the user's inputs on the NPU (``cann_ep.with_static_shapes``: the last few
    kept, as torch_npu keeps the graphs it compiled per shape)."""

    KEPT_SHAPES = 4

    def __init__(self, uri, state: CheckpointState, settings: SessionSettings):
        self.model = _load(uri)
        self.settings = settings
        initialized = {i.name for i in self.model.graph.initializer}
        inputs = [i.name for i in self.model.graph.input if i.name not in initialized]
        self.parameters = [n for n in inputs if n in state.parameters]
        self.scaled = LOSS_SCALE in inputs  # fp16-mixed's training model
        self.user_inputs = [n for n in inputs if n not in state.parameters and n != LOSS_SCALE]
        outputs = [o.name for o in self.model.graph.output]
        self.grads = {p: grad_name(p) for p in self.parameters if grad_name(p) in outputs}
        self.user_outputs = [o for o in outputs if o not in set(self.grads.values())]
        frozen_with_grad = [p for p in self.grads if not state.parameters[p].requires_grad]
        if frozen_with_grad:
            raise ValueError(
                f"the checkpoint freezes {frozen_with_grad}, which the training model differentiates"
            )
        self._sessions: dict[tuple, ort.InferenceSession] = {}
        self.session = self.settings.session(self.model) if not settings.on_npu else None

    def session_for(self, user_inputs: Sequence) -> ort.InferenceSession:
        """The session that runs these inputs (made for their shapes on the NPU)."""
        if len(user_inputs) != len(self.user_inputs):
            raise ValueError(
                f"the model takes {len(self.user_inputs)} inputs {self.user_inputs}, got {len(user_inputs)}"
            )
        if not self.settings.on_npu:
            assert self.session is not None
            return self.session
        shapes = {
            name: tuple(v.shape() if isinstance(v, ort.OrtValue) else np.shape(v))
            for name, v in zip(self.user_inputs, user_inputs, strict=True)
        }
        key = tuple(shapes.items())
        session = self._sessions.pop(key, None) or self.settings.session(self.model, input_shapes=shapes)
        self._sessions[key] = session  # the most recent last
        while len(self._sessions) > self.KEPT_SHAPES:
            del self._sessions[next(iter(self._sessions))]
        self.session = session
        return session

    def bind(
        self, session: ort.InferenceSession, state: CheckpointState, user_inputs: Sequence
    ) -> tuple[ort.IOBinding, list[ort.OrtValue]]:
        """The binding, and the inputs as bound, which the caller holds until the run is over:
        ONNX Runtime copies a host input a device node reads when it is bound, on the NPU
        asynchronously, from memory the value owns."""
        binding = session.io_binding()
        held = [v if isinstance(v, ort.OrtValue) else state.memory.wrap(v) for v in user_inputs]
        for name, value in zip(self.user_inputs, held, strict=True):
            binding.bind_ortvalue_input(name, value)
        for name in self.parameters:
            binding.bind_ortvalue_input(name, state.parameters[name].value)
        for name in self.user_outputs:
            binding.bind_output(name, "cpu")
        return binding, held

    def results(self, state: CheckpointState, binding: ort.IOBinding, as_numpy: bool):
        """The user's outputs, as onnxruntime-training returns them: NumPy where an input was
        NumPy, else OrtValues; one value, or a tuple of several."""
        values = binding.get_outputs()[: len(self.user_outputs)]
        results = tuple(state.memory.numpy(v) for v in values) if as_numpy else tuple(values)
        return results[0] if len(results) == 1 else results


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

    A training model of ``precision="fp16-mixed"`` runs with a ``LossScaler`` (``loss_scaler``:
    ``torch.amp.GradScaler``'s rules, its defaults unless given; its state lives in the
    checkpoint): the call returns the unscaled loss and leaves unscaled gradients, and the
    ``Optimizer`` skips a step whose gradients overflowed.

    ``device``: ``"cpu"``, or ``"npu"`` / ``"npu:N"``, where the training and eval sessions and the
    optimizer's run on the CANN execution provider: every node as an aclnn kernel in the graph's
    precision (``cann_ep``), the sessions made for the shapes of the inputs each call gives. The
    state moves into the device's memory (``DeviceMemory``) and stays there: a step moves the
    batch, the loss and a few scalars over the bus.

    Data parallel, as torch's ``DistributedDataParallel``: with ``process_group`` given (a torch
    process group or a ``DataParallel``), or torch.distributed's default group once it is
    initialized (said once in the log), every rank starts from rank 0's state (parameters,
    properties, loss scale: broadcast here) after the ranks checked they run the same model and
    package versions, and each training call ends with the gradients averaged over the ranks,
    fp16-mixed's overflow flag shared, so that every rank takes the same step. Inside
    ``no_sync()`` the calls accumulate locally; the first call after it averages what they
    accumulated. Under an ``Optimizer(..., zero=1)`` the gradients are reduce-scattered instead: a
    rank's ``Parameter.grad`` is then the mean over the ranks for the parameters it updates
    (``Optimizer.owned``) and its own for the others."""

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
        loss_scaler: LossScaler | None = None,
        process_group=None,
    ):
        self.session_settings = SessionSettings(device, threads, native, session_options)
        if self.session_settings.on_npu and state.memory.device != device:  # not loaded there
            memory = DeviceMemory(device)
            with memory.faults("loading the parameters and optimizer states"):
                state.move_to(memory)
        self._state = state
        self._train = _Program(train_model_uri, state, self.session_settings)
        self._eval = _Program(eval_model_uri, state, self.session_settings) if eval_model_uri else None
        self.training = True
        self._reset_pending = True
        self._computed = False  # a training call has run
        self._gradients = state.attach_gradients(self._train.grads)
        self._scratch: Buffers | None = None  # the next micro-batch's gradients while they accumulate
        self._adder: ort.InferenceSession | None = None
        if self._train.scaled:
            if loss_scaler is not None and state.loss_scaler is not None:
                loss_scaler.load_state_dict(state.loss_scaler.state_dict())  # a resumed run's scale
            state.loss_scaler = loss_scaler or state.loss_scaler or LossScaler()
            state.loss_scaler.place(state.memory, self.session_settings)
        elif loss_scaler is not None:
            raise ValueError("loss_scaler: this training model takes no loss scale (fp16-mixed's does)")
        self._data_parallel = DataParallel.of(process_group)
        self._reducing: _Program | None = None  # the training program that all-reduces in its graph
        self._sync = True
        if self._data_parallel is not None:
            self._start_from_rank0(self._data_parallel)

    def _start_from_rank0(self, parallel: DataParallel) -> None:
        state = self._state
        shapes = {n: (p.value.data_type(), *p.value.shape()) for n, p in state.parameters.items()}
        graph = self._train.model.graph
        parallel.agree(
            {
                "the parameters (names, types and shapes)": str(sorted(shapes.items())),
                "the training model's inputs": str(self._train.user_inputs),
                "the training model's nodes": hashlib.sha256(
                    " ".join(f"{n.domain}::{n.op_type}" for n in graph.node).encode()
                ).hexdigest()[:16],
                **versions(),
            }
        )
        what = "the parameters' broadcast from rank 0"
        if isinstance(state.memory, DeviceMemory):
            values = [p.value for p in state.parameters.values()]
            parallel.broadcast_device(values, state.memory.device_id, what)
        else:
            views = list(state.host_parameters().values())
            parallel.broadcast(views, [0] * len(views), what)
        scaler = state.loss_scaler
        properties, scale = parallel.from_rank0(
            (dict(state.properties), scaler.state_dict() if scaler is not None else None), "rank 0's state"
        )
        state.properties.clear()
        state.properties.update(properties)
        if scaler is not None:
            scaler.load_state_dict(scale)

    @property
    def state(self) -> CheckpointState:
        """The checkpoint state this module trains."""
        return self._state

    @property
    def gradients(self) -> Buffers:
        """The gradients of the trained parameters, as views of one buffer per element type."""
        return self._gradients

    def lay_out_gradients(self, slots: Slots) -> Buffers:
        """The gradients moved into fresh zeroed buffers laid out in ``slots`` (ZeRO stage 1 on the
        NPU, before the first step); returns them."""
        self._gradients = self._state.attach_gradients(self._train.grads, slots)
        self._scratch, self._adder, self._reducing = None, None, None
        return self._gradients

    @property
    def trained(self) -> list[str]:
        """The parameters the training model differentiates, in its order."""
        return list(self._train.grads)

    @property
    def computed_gradients(self) -> bool:
        """Whether a training call has computed the gradients."""
        return self._computed

    @property
    def loss_scaler(self) -> LossScaler | None:
        """The loss scaler of a training model of fp16-mixed; None otherwise."""
        return self._state.loss_scaler if self._train.scaled else None

    @property
    def data_parallel(self) -> DataParallel | None:
        """The processes this module averages its gradients over; None in one process."""
        return self._data_parallel

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
        self.training = mode
        return self

    def eval(self) -> Module:
        if self._eval is None:
            raise RuntimeError("this Module has no eval model (pass eval_model_uri)")
        return self.train(False)

    @property
    def training_session(self) -> ort.InferenceSession:
        """The training model's ONNX Runtime session (to end its profiling, say): on the NPU, the
        one of the last call's input shapes; under data parallel on NPUs, the one of the model that
        all-reduces in its graph once a call ran it."""
        program = self._reducing if self._reducing is not None else self._train
        if program.session is None:
            raise RuntimeError("on the NPU the training session is made for the first call's input shapes")
        return program.session

    def _program(self) -> _Program:
        """The program of the current mode (``eval()`` has checked there is an eval model)."""
        program = self._train if self.training else self._eval
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
        """The model's outputs (the loss first): NumPy when an input is NumPy (or any other array
        or number), OrtValues when every input is one, as onnxruntime-training's; one value, or a
        tuple of several."""
        with self._state.memory.faults("the training step" if self.training else "the eval step"):
            return self._call(user_inputs)

    def _reduced_in_graph(self) -> _Program | None:
        """Under data parallel on the NPU, for a call that ends a step without accumulating onto
        earlier micro-batches: the training program whose graph all-reduces the gradients in
        buckets as the backward makes them (``gradient_buckets``), made on first use."""
        parallel = self._data_parallel
        if parallel is None or parallel.shards is not None or not self._sync or not self._reset_pending:
            return None  # ZeRO stage 1 reduce-scatters after the run
        if not isinstance(self._gradients, DeviceBuffers):
            return None
        if self._reducing is None:
            model = self._train.model
            shapes = {grad_name(p): view.shape() for p, view in self._gradients.views.items()}
            sizes = gradient_sizes(model, list(self._train.grads.values()), shapes)
            hccl = parallel.hccl(self._state.memory.device_id)
            reduced = with_all_reduce(model, buckets(model, sizes, parallel.bucket_bytes), hccl.name)
            self._reducing = _Program(reduced, self._state, self.session_settings)
        return self._reducing

    def _call(self, user_inputs):
        reducing = self._reduced_in_graph() if self.training else None
        program = reducing or self._program()
        session = program.session_for(user_inputs)
        binding, held = program.bind(session, self._state, user_inputs)
        as_numpy = not all(isinstance(value, ort.OrtValue) for value in user_inputs)
        if not self.training:
            session.run_with_iobinding(binding)
            return program.results(self._state, binding, as_numpy)
        accumulate = not self._reset_pending
        if accumulate and self._scratch is None:
            self._scratch = self._state.memory.buffers(self._gradients.views, self._gradients.slots)
        targets = self._scratch if accumulate else self._gradients
        assert targets is not None
        for p, grad in program.grads.items():
            binding.bind_ortvalue_output(grad, targets.views[p])
        scaler = self.loss_scaler
        if scaler is not None:
            seed = scaler.seed(1 if self._data_parallel is None else self._data_parallel.size)
            held.append(seed)
            binding.bind_ortvalue_input(LOSS_SCALE, seed)
        session.run_with_iobinding(binding)
        if reducing is not None:
            assert self._data_parallel is not None and isinstance(self._gradients, DeviceBuffers)
            self._data_parallel.wait_for_graph(self._gradients.memory.device_id)
        if scaler is not None:
            scaler.unscale(targets, seed, accumulate)
        if accumulate:
            self._accumulate()
        self._reset_pending = False
        self._computed = True
        if reducing is not None:
            # Summed in the graph; an inf or NaN of any rank is in every rank's sum, so each found it.
            self._gradients.scale(1.0 / self._data_parallel.size)
        elif self._data_parallel is not None and self._sync:
            self._reduce(self._data_parallel, scaler)
        return program.results(self._state, binding, as_numpy)

    def _reduce(self, parallel: DataParallel, scaler: LossScaler | None) -> None:
        """The gradients averaged over the ranks, and the overflow flag shared: where the state
        lives, device to device through HCCL on the NPU."""
        if isinstance(self._gradients, DeviceBuffers):
            flag = scaler.found_inf_value if scaler is not None else None
            parallel.reduce_device_gradients(self._gradients, flag)
            return
        found = parallel.reduce_gradients(
            self._gradients.host_arrays(), scaler.found_inf if scaler is not None else None
        )
        if scaler is not None:
            scaler.found_inf = found

    def scale_grads(self, factor: float) -> None:
        """Multiplies every gradient by ``factor`` where it lies (1/N averages N accumulated
        micro-batches, as transformers' Trainer divides each one's loss by N)."""
        self._gradients.scale(factor)

    def _accumulate(self) -> None:
        """Adds the micro-batch's gradients to the others: the scratch buffers are laid out as the
        gradients' (made from them), so one elementwise Add per buffer, written where it reads
        (as SGD's update does: optim.py's doc)."""
        assert self._scratch is not None
        if self._adder is None:
            self._adder = self.session_settings.session(
                _accumulation_model([ortvalue_type(f) for f in self._gradients.flat]), native=False
            )
        binding = self._adder.io_binding()
        for i, (grads, scratch) in enumerate(zip(self._gradients.flat, self._scratch.flat, strict=True)):
            binding.bind_ortvalue_input(f"a{i}", grads)
            binding.bind_ortvalue_input(f"b{i}", scratch)
            binding.bind_ortvalue_output(f"sum{i}", grads)
        self._adder.run_with_iobinding(binding)

    def _parameter_names(self, trainable_only: bool) -> list[str]:
        """The parameters in the training model's order (onnxruntime-training's), the trained
        ones alone if ``trainable_only``."""
        names = self._train.parameters
        return (
            [n for n in names if self._state.parameters[n].requires_grad] if trainable_only else list(names)
        )

    def get_parameters_size(self, trainable_only: bool = True) -> int:
        """The number of elements of the parameters (the trained ones alone by default)."""
        parameters = self._state.parameters
        return sum(
            int(np.prod(parameters[n].value.shape(), dtype=np.int64))
            for n in self._parameter_names(trainable_only)
        )

    def get_contiguous_parameters(self, trainable_only: bool = False) -> ort.OrtValue:
        """A copy of the parameters, flattened one after another in the training model's order, as
        one 1-D OrtValue (they must share one element type)."""
        names = self._parameter_names(trainable_only)
        arrays = [self._state.parameters[n].data.reshape(-1) for n in names]
        self._one_type(arrays, "get_contiguous_parameters")
        flat = np.concatenate(arrays) if arrays else np.zeros(0, np.float32)
        return self._state.memory.copy(flat)

    def copy_buffer_to_parameters(
        self, buffer: ort.OrtValue | np.ndarray, trainable_only: bool = True
    ) -> None:
        """Sets the parameters from a 1-D ``buffer`` laid out as ``get_contiguous_parameters``
        gives them (the trained ones alone by default)."""
        names = self._parameter_names(trainable_only)
        parameters = self._state.parameters
        flat = self._state.memory.numpy(buffer) if isinstance(buffer, ort.OrtValue) else np.asarray(buffer)
        expected = self.get_parameters_size(trainable_only)
        if flat.ndim != 1 or flat.size != expected:
            raise ValueError(
                f"copy_buffer_to_parameters: the buffer must be 1-D with the {expected} elements of the "
                f"{'trainable ' if trainable_only else ''}parameters; got shape {list(flat.shape)}"
            )
        start = 0
        for name in names:
            shape = parameters[name].value.shape()
            size = int(np.prod(shape, dtype=np.int64))
            parameters[name].data = flat[start : start + size].reshape(shape)
            start += size

    @staticmethod
    def _one_type(arrays: list[np.ndarray], what: str) -> None:
        types = sorted({str(a.dtype) for a in arrays})
        if len(types) > 1:
            raise ValueError(
                f"{what}: the parameters have several element types {types}; one buffer holds one"
            )

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
