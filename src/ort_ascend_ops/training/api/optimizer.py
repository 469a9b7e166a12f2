"""``Optimizer``: the optimizer model over a module's trained parameters (onnxruntime-training's
``Optimizer``). It depends on the checkpoint state, which holds the parameters and its own state
(step, learning rate, per-parameter states), and on what the module gives it: the gradients, the
loss scaler and the data-parallel group.

AdamW updates in place (``optim.in_place``), SGD by writing each update into the buffer it
replaces (``optim.OWN_BUFFERS``); AdamW under ``native=False`` or session options of the user's
writes into a second buffer that then takes the first one's place, so each updated value costs
twice its size."""

from __future__ import annotations

import collections
import contextlib
import math
from collections.abc import Iterator

import numpy as np
import onnx
import onnxruntime as ort

from ...autodiff import grad_name
from ..checkpoint import Deferred
from ..optim import (
    LEARNING_RATE,
    OWN_BUFFERS,
    STEP,
    UPDATED_ELEMENTS,
    from_metadata,
    in_place,
    optimizer_model,
    state_name,
    updated,
)
from .checkpoint_state import Buffers, OptimizerState, Slots, dtype_of
from .data_parallel import DataParallel, Shards
from .device_memory import DeviceBuffers, DeviceMemory
from .module import Module

ZERO_STAGES = (0, 1)


class Optimizer:
    """Runs the optimizer model over the module's trainable parameters. The learning rate starts
    at the optimizer's default (``lr`` of ``optim.AdamW`` or ``optim.SGD`` given to
    ``generate_artifacts``) unless the checkpoint holds one. ``session_options``: the module's
    unless given (to profile one session and not the other, say).

    Under a data-parallel module every rank starts from rank 0's step, learning rate and states.
    ``zero=1`` shards the states as ZeRO stage 1: each rank holds the states of, and updates, a
    contiguous run of about 1/N of the gradient buffers' elements (``DataParallel.shard``,
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
            optimizer_model_uri
            if isinstance(optimizer_model_uri, onnx.ModelProto)
            else onnx.load(optimizer_model_uri)
        )
        self.options = from_metadata(model)
        if zero not in ZERO_STAGES:
            raise ValueError(
                f"zero: the stages are {ZERO_STAGES} (1 shards the optimizer states), got {zero}"
            )
        self._module, self._state = module, module.state
        state, parallel = module.state, module.data_parallel
        inputs = {i.name for i in model.graph.input}
        trained = [p for p in state.parameters.keys() if p in inputs]
        untrained = [p for p in module.trained if p not in trained]
        if untrained:
            raise ValueError(f"the optimizer model does not update {untrained}")
        self._trained = trained
        self._parallel = parallel
        self._owners = [0] * len(trained)  # the rank that updates each of them
        self._laid_out: Buffers | None = None  # ZeRO's parameters, laid out as their gradients
        if zero and parallel is not None:
            if isinstance(state.memory, DeviceMemory):  # HCCL moves equal blocks: a slot per rank
                owners = Shards.of(module.gradients, parallel.size).owners
                module.lay_out_gradients(Slots(owners, parallel.size))
            shards = parallel.shard(module.gradients)
            self._owners = [shards.owners.get(p, 0) for p in trained]
            self._laid_out = state.lay_out_parameters_as(module.gradients)
        self.zero = int(self._laid_out is not None)
        rank = parallel.rank if parallel is not None else 0
        self._names = [p for p, o in zip(trained, self._owners, strict=True) if o == rank or not self.zero]
        if self.zero and self._names:
            types = {i.name: i.type for i in model.graph.input}
            model = optimizer_model({p: types[p] for p in self._names}, self.options)
        settings = module.session_settings
        # In place needs our kernel's alias map and sequential execution: our own options, on the
        # CPU. On a device the inputs are copied there before a node runs, so every update may be
        # written back into the host buffer it replaces.
        on_cpu = settings.device == "cpu"
        own_options = session_options is None and settings.options is None
        self._in_place = in_place(model) if settings.native and own_options and on_cpu else None
        self._own_buffers = self._in_place is None and (type(self.options) in OWN_BUFFERS or not on_cpu)
        # A rank owning nothing (more ranks than parameters) runs no session.
        self._session = (
            settings.session(self._in_place or model, options=session_options) if self._names else None
        )
        if state.optimizer_state is None:
            state.optimizer_state = OptimizerState(0, float(self.options.lr))
        self._scalars = state.optimizer_state
        if parallel is not None:
            step, rate = parallel.from_rank0(
                (self._scalars.step, self._scalars.learning_rate), "rank 0's optimizer step"
            )
            self._scalars.step, self._scalars.learning_rate = step, rate
        values = self._scalars.values
        held = all(p in values.get(s, {}) for s in self.options.states for p in trained)
        for s in self.options.states:
            of_state = values.setdefault(s, {})
            for p in self._names:
                if p not in of_state:
                    of_state[p] = state.memory.zeros_like(state.parameters[p].value)
                elif of_state[p].shape() != state.parameters[p].value.shape():
                    raise ValueError(f"the checkpoint's {s} of '{p}' is shaped {of_state[p].shape()}")
        if parallel is not None:
            self._states_from_rank0(parallel, held)
        self._spare: dict[tuple[str, str], ort.OrtValue] = {}

    def _states_from_rank0(self, parallel: DataParallel, held: bool) -> None:
        """Every rank's states set to rank 0's (a resumed checkpoint's), each on the rank that
        owns it; rank 0 then keeps its own shard alone."""
        values, memory = self._scalars.values, self._state.memory
        if not parallel.from_rank0(held, "rank 0's optimizer states"):
            return  # a fresh start: zeros everywhere
        what = "the optimizer states' scatter from rank 0"
        if isinstance(memory, DeviceMemory):
            self._states_from_rank0_on_device(parallel, memory, what)
            return
        for s in self.options.states:
            for p, owner in zip(self._trained, self._owners, strict=True):
                if not self.zero:
                    parallel.broadcast([memory.view(values[s][p])], [0], what)
                elif owner != 0 and parallel.rank == 0:
                    parallel.send_to(memory.view(values[s].pop(p)), owner, what)
                elif owner != 0 and parallel.rank == owner:
                    parallel.receive_from(memory.view(values[s][p]), 0, what)

    def _states_from_rank0_on_device(self, parallel: DataParallel, memory: DeviceMemory, what: str) -> None:
        """``_states_from_rank0`` through HCCL, whose broadcast every rank joins: a rank that
        neither sends nor keeps a state receives it into scratch it then drops."""
        values = self._scalars.values
        for s in self.options.states:
            for p, owner in zip(self._trained, self._owners, strict=True):
                if self.zero and owner == 0:
                    continue  # rank 0 holds it already
                mine = parallel.rank == 0 or parallel.rank == owner or not self.zero
                target = values[s][p] if mine else memory.zeros_like(self._state.parameters[p].value)
                parallel.broadcast_device([target], memory.device_id, what)
                if self.zero and parallel.rank == 0:
                    del values[s][p]

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
        parallel = self._parallel
        if not self.zero or parallel is None:
            yield
            return
        values, memory, parameters = self._scalars.values, self._state.memory, self._state.parameters
        what = "the optimizer states' gather to rank 0"
        others = [
            (s, p, o) for s in self.options.states for p, o in zip(self._trained, self._owners, strict=True)
        ]
        others = [(s, p, o) for s, p, o in others if o != 0]
        if isinstance(memory, DeviceMemory):
            with _streamed(parallel, memory, parameters, values, others, what):
                yield
            return
        gathered = []
        for s, p, owner in others:
            if parallel.rank == owner:
                parallel.send_to(memory.view(values[s][p]), 0, what)
            elif parallel.rank == 0:
                values[s][p] = memory.zeros_like(parameters[p].value)
                parallel.receive_from(memory.view(values[s][p]), owner, what)
                gathered.append((s, p))
        try:
            yield
        finally:
            for s, p in gathered:
                del values[s][p]

    @property
    def session(self) -> ort.InferenceSession | None:
        """The optimizer model's ONNX Runtime session (None on a ZeRO rank that owns nothing)."""
        return self._session

    @property
    def step_count(self) -> int:
        """Steps taken, those of the run a checkpoint resumes included."""
        return self._scalars.step

    def set_learning_rate(self, learning_rate: float) -> None:
        rate = float(learning_rate)
        if not (math.isfinite(rate) and rate >= 0):
            raise ValueError(
                f"set_learning_rate: the learning rate must be finite and >= 0, got {learning_rate}"
            )
        self._scalars.learning_rate = rate

    def get_learning_rate(self) -> float:
        return self._scalars.learning_rate

    def states(self) -> dict[str, dict[str, np.ndarray]]:
        """The optimizer's states this rank holds (``exp_avg``, ... of each parameter), as NumPy
        copies, as ``torch.optim``'s ``optimizer.state`` gives them per parameter."""
        memory = self._state.memory
        return {
            s: {p: memory.read(v) for p, v in values.items()} for s, values in self._scalars.values.items()
        }

    @property
    def updates_in_place(self) -> bool:
        """Whether a step writes parameters and states into their own buffers (see the module's
        doc) rather than into a second one."""
        return self._in_place is not None or self._own_buffers

    def get_loss_scale(self) -> float:
        """The loss scale of the next step (fp16-mixed); 1.0 for a model without loss scaling, as
        a disabled ``GradScaler`` gives."""
        scaler = self._module.loss_scaler
        return scaler.get_scale() if scaler is not None else 1.0

    def step(self) -> bool:
        """One update of every trainable parameter from its current gradient; False (nothing
        updated, the step count kept) when under fp16-mixed a gradient overflowed since the last
        reset, the loss scale then backed off, as ``GradScaler.step`` and ``update`` do."""
        if not self._module.computed_gradients:
            raise RuntimeError("no gradients yet: run the module before the optimizer")
        scaler = self._module.loss_scaler
        if scaler is not None and scaler.found_inf:
            scaler.update()
            return False
        if self._session is not None:
            with self._state.memory.faults("the optimizer step"):
                self._update_own()
        if self._laid_out is not None:  # set under ZeRO stage 1 alone
            assert self._parallel is not None
            if isinstance(self._laid_out, DeviceBuffers):
                self._parallel.all_gather_device(self._laid_out)
            else:
                self._parallel.all_gather(self._laid_out.host_arrays())
        self._scalars.step += 1
        if scaler is not None:
            scaler.update()
        return True

    def _update_own(self) -> None:
        state, memory = self._state, self._state.memory
        assert self._session is not None
        binding = self._session.io_binding()
        held = {  # alive until the run is over (module.py's _Program.bind)
            LEARNING_RATE: memory.scalar(self.get_learning_rate(), np.float32),
            STEP: memory.scalar(self.step_count + 1, np.int64),
        }
        for name, value in held.items():
            binding.bind_ortvalue_input(name, value)
        for p in self._names:
            parameter = state.parameters[p]
            binding.bind_ortvalue_input(p, parameter.value)
            binding.bind_ortvalue_input(grad_name(p), parameter.grad_value)
            for s in self.options.states:
                binding.bind_ortvalue_input(state_name(p, s), self._scalars.values[s][p])
        if self._in_place is not None:
            binding.bind_output(UPDATED_ELEMENTS)
            self._session.run_with_iobinding(binding)
        elif self._own_buffers:
            self._step_into(binding, lambda name, of_state, value: value)
        else:
            self._step_into_spares(binding)

    def _step_into(self, binding: ort.IOBinding, buffer_of) -> None:
        """Runs the functional model, each updated value written into ``buffer_of(parameter,
        state or "", its current value)``."""
        assert self._session is not None
        for p in self._names:
            binding.bind_ortvalue_output(updated(p), buffer_of(p, "", self._state.parameters[p].value))
            for s in self.options.states:
                value = self._scalars.values[s][p]
                binding.bind_ortvalue_output(updated(state_name(p, s)), buffer_of(p, s, value))
        self._session.run_with_iobinding(binding)

    def _step_into_spares(self, binding: ort.IOBinding) -> None:
        state = self._state
        self._step_into(binding, self._spare_of)
        for p in self._names:
            if self._laid_out is not None:  # ZeRO's parameters stay where the all-gather sends them
                state.memory.write(state.parameters[p].value, state.memory.view(self._spare[(p, "")]))
            else:
                self._spare[(p, "")] = state.replace_parameter(p, self._spare[(p, "")])
            for s in self.options.states:
                values = self._scalars.values[s]
                values[p], self._spare[(p, s)] = self._spare[(p, s)], values[p]

    def _spare_of(self, name: str, of_state: str, like: ort.OrtValue) -> ort.OrtValue:
        if (name, of_state) not in self._spare:
            self._spare[(name, of_state)] = self._state.memory.zeros_like(like)
        return self._spare[(name, of_state)]


@contextlib.contextmanager
def _streamed(parallel: DataParallel, memory: DeviceMemory, parameters, values, others, what: str):
    """``Optimizer.consolidated`` on NPUs: the states of ranks other than 0 (``others``: state,
    parameter, owner) come to rank 0 one at a time, each an HCCL broadcast from its owner that every
    rank joins in the order of the file (the checkpoint's sorted names), when rank 0's save reads it
    (``Deferred``): rank 0's device holds one of them at a time, and its host only those read ahead
    of the file's order. The other ranks join every broadcast on entering; rank 0 runs those its
    save did not read on leaving. Inside, rank 0 may save and nothing else collective."""
    pending = collections.deque(sorted(others, key=lambda t: f"{t[0]}/{t[1]}"))
    ahead: dict[tuple[str, str], np.ndarray] = {}

    def next_one() -> None:
        s, p, owner = pending.popleft()
        target = values[s][p] if parallel.rank == owner else memory.zeros_like(parameters[p].value)
        parallel.broadcast_device([target], memory.device_id, what, root=owner)
        if parallel.rank == 0:
            ahead[(s, p)] = memory.read(target)

    def deferred(s: str, p: str) -> Deferred:
        def read() -> np.ndarray:
            while (s, p) not in ahead:
                next_one()
            return ahead.pop((s, p))

        like = parameters[p].value
        return Deferred(tuple(like.shape()), dtype_of(like), read)

    if parallel.rank != 0:
        while pending:
            next_one()
        yield
        return
    for s, p, _ in others:
        values[s][p] = deferred(s, p)
    try:
        yield
    finally:
        while pending:
            next_one()
        for s, p, _ in others:
            del values[s][p]
