"""Dynamic loss scaling, ``torch.amp.GradScaler``'s rules and state in one object: the scale the
next backward starts from, its growth tracker, and whether the gradients since the last reset hold
an inf or a NaN. The state lives where the module's does (``place``): on the NPU in device memory
across steps, as torch_npu's ``GradScaler`` keeps its tensors, read there by the training and
unscaling sessions and updated there by a graph (``loss_scaling``), so no scale crosses the bus.
The host reads the flag, as ``GradScaler.step`` does with ``.item()`` (``Optimizer.step`` returns
it), and the scale on request. The checkpoint saves ``state_dict()``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import onnxruntime as ort

from ...runtime import ortvalue_type
from ..loss_scaling import (
    FOUND_BEFORE,
    FOUND_INF,
    GROWTH_TRACKER,
    NEW_GROWTH_TRACKER,
    NEW_SCALE,
    RANKS,
    SCALE,
    SEED,
    seed_model,
    unscale_model,
    update_model,
)
from .sessions import SessionSettings

if TYPE_CHECKING:
    from .checkpoint_state import Buffers, HostMemory

_TRACKER_LIMIT = 2**31  # the tracker is int32, as torch's
_FLOAT32_MAX = float(np.finfo(np.float32).max)  # the scale is float32, as torch's


class LossScaler:
    """``GradScaler``'s defaults: start at ``init_scale``; a step whose gradients hold an inf or
    NaN is skipped and the scale multiplied by ``backoff_factor``; after ``growth_interval``
    finite steps in a row it is multiplied by ``growth_factor``. The scale is float32, as torch's."""

    def __init__(
        self,
        init_scale: float = 65536.0,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ):
        self._sessions: dict[tuple, ort.InferenceSession] = {}
        self._rules(init_scale, growth_factor, backoff_factor, growth_interval, 0)
        # Until a module places it, the scale and tracker it starts from, as GradScaler's before
        # its first use.
        self._initial: tuple[float, int] = (init_scale, 0)
        self._memory: HostMemory | None = None
        self._settings = SessionSettings()
        self._values: dict[str, ort.OrtValue] = {}

    @staticmethod
    def _checked(scale, growth_factor, backoff_factor, growth_interval, growth_tracker) -> None:
        if (
            not (0 < scale <= _FLOAT32_MAX and math.isfinite(growth_factor) and growth_factor > 1)
            or not 0 < backoff_factor < 1
        ):
            raise ValueError(
                "LossScaler: needs an init_scale > 0 finite in float32, a finite growth_factor > 1 and "
                f"0 < backoff_factor < 1; got {scale}, {growth_factor}, {backoff_factor}"
            )
        if int(growth_interval) != growth_interval or not 1 <= growth_interval < _TRACKER_LIMIT:
            raise ValueError(
                f"LossScaler: growth_interval must be an integer in [1, 2**31) (the tracker is int32), "
                f"got {growth_interval}"
            )
        if int(growth_tracker) != growth_tracker or not 0 <= growth_tracker < growth_interval:
            raise ValueError(
                f"LossScaler: the growth tracker must be an integer in [0, {growth_interval}), got {growth_tracker}"
            )

    def _rules(self, scale, growth_factor, backoff_factor, growth_interval, growth_tracker) -> None:
        self._checked(scale, growth_factor, backoff_factor, growth_interval, growth_tracker)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self._sessions.pop(("update",), None)  # its graph holds the rules

    def place(self, memory: HostMemory, settings: SessionSettings) -> None:
        """The state moved into ``memory`` (a module's), its graphs run on ``settings``' device."""
        if memory is not self._memory:
            initial = (self.get_scale(), self.growth_tracker)
            self._values = {
                SCALE: memory.copy(np.array(initial[0], np.float32)),
                GROWTH_TRACKER: memory.copy(np.array(initial[1], np.int32)),
                FOUND_INF: memory.copy(np.array(self.found_inf, np.float32)),
                FOUND_BEFORE: memory.copy(np.array(0.0, np.float32)),  # a fresh flag's seed: never written
                SEED: memory.copy(np.array(initial[0], np.float32)),
            }
            self._memory = memory
        self._settings = settings
        self._sessions.clear()

    def _placed(self, what: str) -> HostMemory:
        if self._memory is None:
            raise RuntimeError(f"LossScaler.{what}: the scaler has no state yet; a Module places it")
        return self._memory

    def _session(self, key: tuple, model) -> ort.InferenceSession:
        if key not in self._sessions:
            self._sessions[key] = self._settings.session(model())
        return self._sessions[key]

    def _read(self, name: str, initial: float | int):
        return initial if self._memory is None else self._memory.read(self._values[name]).item()

    def get_scale(self) -> float:
        return float(np.float32(self._read(SCALE, self._initial[0])))

    @property
    def scale(self) -> float:
        return self.get_scale()

    @property
    def growth_tracker(self) -> int:
        return int(self._read(GROWTH_TRACKER, self._initial[1]))

    @property
    def found_inf(self) -> bool:
        """Whether the gradients since the last reset hold an inf or a NaN (read from the device)."""
        return bool(self._read(FOUND_INF, False))

    @found_inf.setter
    def found_inf(self, found: bool) -> None:
        self._placed("found_inf").write(self._values[FOUND_INF], np.array(float(found), np.float32))

    @property
    def found_inf_value(self) -> ort.OrtValue:
        """The flag where it lives (a float32 scalar, nonzero once an inf or NaN was found), for
        data parallel to reduce it there."""
        self._placed("found_inf_value")
        return self._values[FOUND_INF]

    def seed(self, ranks: int = 1) -> ort.OrtValue:
        """The scale the backward starts from: under data parallel each of ``ranks`` seeds it with
        scale / ranks (computed where the scale lives: ``loss_scaling.seed_model``), as Apex's and Horovod's gradient predivision does, so that its float16
        values are those of its rows in the one process of ``ranks`` times its batch, and it
        overflows where that process would, not ``ranks`` times sooner."""
        memory = self._placed("seed")
        if ranks == 1:
            return self._values[SCALE]
        session = self._session(("seed",), seed_model)
        binding = session.io_binding()
        held = memory.scalar(float(ranks), np.float32)  # alive until the run is over
        binding.bind_ortvalue_input(SCALE, self._values[SCALE])
        binding.bind_ortvalue_input(RANKS, held)
        binding.bind_ortvalue_output(SEED, self._values[SEED])
        session.run_with_iobinding(binding)
        return self._values[SEED]

    def unscale(self, grads: Buffers, seed: ort.OrtValue, accumulate: bool) -> None:
        """Divides every gradient by ``seed`` where it lies, one node per gradient buffer, setting
        the flag where any overflowed; ``accumulate`` keeps the flag of the micro-batches before."""
        if not grads.flat:
            return
        types = [(f.data_type(), tuple(f.shape())) for f in grads.flat]
        session = self._session(
            ("unscale", *types), lambda: unscale_model([ortvalue_type(f) for f in grads.flat])
        )
        binding = session.io_binding()
        binding.bind_ortvalue_input(SCALE, seed)
        binding.bind_ortvalue_input(FOUND_BEFORE, self._values[FOUND_INF if accumulate else FOUND_BEFORE])
        binding.bind_ortvalue_output(FOUND_INF, self._values[FOUND_INF])
        for i, flat in enumerate(grads.flat):
            binding.bind_ortvalue_input(f"g{i}", flat)
            binding.bind_ortvalue_output(f"unscaled{i}", flat)
        session.run_with_iobinding(binding)

    def update(self) -> None:
        """``GradScaler.update``: the scale after a step, backed off where ``found_inf`` is set."""
        self._placed("update")
        session = self._session(
            ("update",), lambda: update_model(self.growth_factor, self.backoff_factor, self.growth_interval)
        )
        binding = session.io_binding()
        for name in (SCALE, GROWTH_TRACKER, FOUND_INF):
            binding.bind_ortvalue_input(name, self._values[name])
        binding.bind_ortvalue_output(NEW_SCALE, self._values[SCALE])
        binding.bind_ortvalue_output(NEW_GROWTH_TRACKER, self._values[GROWTH_TRACKER])
        session.run_with_iobinding(binding)

    def state_dict(self) -> dict[str, float | int]:
        """``GradScaler.state_dict()``'s keys and values."""
        return {
            "scale": self.get_scale(),
            "growth_factor": self.growth_factor,
            "backoff_factor": self.backoff_factor,
            "growth_interval": self.growth_interval,
            "_growth_tracker": self.growth_tracker,
        }

    def load_state_dict(self, state: dict) -> None:
        """A ``state_dict()`` (ours or ``GradScaler``'s); a checkpoint of before the rules were
        saved holds the scale and tracker alone, under ``growth_tracker``: the rules stay."""
        try:
            scale = float(state["scale"])
            tracker = state["_growth_tracker"] if "_growth_tracker" in state else state["growth_tracker"]
            self._rules(
                scale,
                float(state.get("growth_factor", self.growth_factor)),
                float(state.get("backoff_factor", self.backoff_factor)),
                state.get("growth_interval", self.growth_interval),
                tracker,
            )
        except (KeyError, TypeError) as error:
            raise ValueError(
                f"LossScaler: not a loss scaler's state ({type(error).__name__}: {error})"
            ) from None
        if self._memory is None:
            self._initial = (scale, int(tracker))
            return
        self._memory.write(self._values[SCALE], np.array(scale, np.float32))
        self._memory.write(self._values[GROWTH_TRACKER], np.array(int(tracker), np.int32))

    def __repr__(self) -> str:
        return f"LossScaler({self.state_dict()})"
