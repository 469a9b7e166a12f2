"""What ``train --device npu`` prints at its first steps: where every node of the training and
optimizer sessions ran (ONNX Runtime's profile of the first step, ``placement.read_profile``),
and, on the emulated CANN runtime, what crossed the bus in the second step and how much device
memory it held (the emulator's counters): never our own bookkeeping. Ascend hardware has no such
counters; there the report says so, and the profile's copy nodes are all it knows of the bus."""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import onnxruntime as ort

from .. import aclnn_emulator
from .placement import read_profile

MB = 1 << 20
COLLECTIVES = ("HcclAllReduce", "HcclReduceScatter", "HcclAllGather", "HcclBroadcast")


def profiled_options(options: ort.SessionOptions, folder: Path, session: str) -> ort.SessionOptions:
    """``options`` profiling into ``folder`` under ``session``'s name (one file per session)."""
    folder.mkdir(parents=True, exist_ok=True)
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / session)
    return options


def placement_lines(sessions: dict[str, ort.InferenceSession]) -> list[str]:
    """Each session's placement from its profile so far; profiling ends with it (sessions made
    later for other shapes start their own, which nothing reads: the caller turns it off)."""
    lines = []
    for name, session in sessions.items():
        path = Path(session.end_profiling())
        placement = read_profile(path)
        path.unlink(missing_ok=True)
        lines.append(f"{name}: " + "; ".join(placement.lines()))
    return lines


def state_bytes(values: Iterable[ort.OrtValue]) -> int:
    """The bytes of the model state's values (parameters, gradients, optimizer states)."""
    from ..training.api.checkpoint_state import dtype_of

    return sum(int(np.prod(v.shape(), dtype=np.int64)) * dtype_of(v).itemsize for v in values)


class BusMeter:
    """The emulator's counters over one step: ``start`` before it, ``lines`` after it."""

    def __init__(self, counters: ctypes.CDLL):
        self.counters = counters

    def start(self) -> None:
        self.counters.aclemu_reset()

    def lines(self, step: int, model_state: int, batch_bytes: int) -> list[str]:
        moved = {d: self.counters.aclemu_copied_bytes(d.encode()) for d in ("H2D", "D2H", "D2D")}
        peak = self.counters.aclemu_device_bytes_peak()
        calls = {c: self.counters.aclemu_calls(c.encode()) for c in COLLECTIVES}
        sent = {c: self.counters.aclemu_collective_bytes(c.encode()) for c in COLLECTIVES if calls[c]}
        hccl = [
            f"HCCL in step {step}: "
            + ", ".join(f"{c} x{calls[c]} ({sent[c]:,} bytes)" for c in sent)
            + ", device to device"
        ]
        return (hccl if sent else []) + [
            f"bus in step {step}: {moved['H2D']:,} bytes to the NPU, {moved['D2H']:,} back "
            f"({moved['D2D']:,} within it); the batch is {batch_bytes:,} bytes",
            f"device memory in step {step}: peak {peak / MB:,.1f} MB = the model state (parameters, gradients, "
            f"optimizer states) {model_state / MB:,.1f} MB + activations, workspace and what ONNX Runtime's arena "
            f"keeps {(peak - model_state) / MB:,.1f} MB",
        ]


NO_COUNTERS = "bus and device memory: not counted on this CANN runtime (the emulator counts them)"


class FirstSteps:
    """The report over a run's first two steps on the NPU: the sessions made with ``options``
    profile the first, the emulator's counters (where they exist) meter the second."""

    def __init__(self, folder: Path, threads: int | None):
        from ..training.api import training_session_options

        self.options = {
            s: profiled_options(training_session_options(threads=threads), folder, s)
            for s in ("training", "optimizer")
        }
        self.meter: BusMeter | None = None  # once the first step has loaded the CANN runtime
        self.steps = 0

    def before_step(self) -> None:
        if self.steps == 1 and self.meter is not None:
            self.meter.start()

    def after_step(self, step: int, module, optimizer, batch_bytes: int) -> list[str]:
        """The lines to print after the run's first and second steps (none after others)."""
        self.steps += 1
        if self.steps == 1:
            sessions = {"training": module.training_session, "optimizer": optimizer.session}
            lines = placement_lines(sessions)
            for options in self.options.values():  # sessions of other shapes, or the eval's
                options.enable_profiling = False
            counters = aclnn_emulator.counters()
            self.meter = BusMeter(counters) if counters is not None else None
            return [f"NPU, step {step}, where the nodes ran (ONNX Runtime's profile):", *lines] + (
                [NO_COUNTERS] if self.meter is None else []
            )
        if self.steps == 2 and self.meter is not None:
            state = module.state
            values = [p.value for p in state.parameters.values()]
            values += [p.grad_value for p in state.parameters.values() if p.grad_value is not None]
            if state.optimizer_state is not None:
                values += [v for per_name in state.optimizer_state.values.values() for v in per_name.values()]
            return self.meter.lines(step, state_bytes(values), batch_bytes)
        return []
