"""Learning-rate schedules as functions of the optimizer's step count, so that a resumed run
continues its schedule: a linear warm-up from 0, then transformers' ``get_*_schedule_with_warmup``
curves. ``LinearLRScheduler`` is onnxruntime-training's class; ``train --lr-scheduler`` takes any
of ``SCHEDULES`` through ``LRScheduler``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .optimizer import Optimizer

SCHEDULES = ("linear", "cosine", "constant")


def learning_rate(schedule: str, step: int, peak: float, warmup: int, total: int) -> float:
    """The rate of the step after ``step`` steps: ``peak * step / warmup`` during the warm-up,
    then ``peak`` decayed linearly or along a half cosine to 0 at step ``total``, or held."""
    if schedule not in SCHEDULES:
        raise ValueError(f"learning-rate schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    if step < warmup:
        return peak * step / max(1, warmup)
    if schedule == "constant":
        return peak
    progress = (step - warmup) / max(1, total - warmup)
    if schedule == "cosine":
        return peak * max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
    return peak * max(0.0, (total - step) / max(1, total - warmup))


class LRScheduler:
    """Sets ``optimizer``'s rate to ``learning_rate(schedule, step count, ...)`` now and at every
    ``step()`` (call it after each ``optimizer.step()``)."""

    def __init__(
        self,
        optimizer: Optimizer,
        schedule: str,
        warmup_step_count: int,
        total_step_count: int,
        initial_lr: float,
    ):
        learning_rate(schedule, 0, 0.0, 0, 0)  # an unknown schedule named now
        self._optimizer, self.schedule = optimizer, schedule
        self.warmup_step_count, self.total_step_count = int(warmup_step_count), int(total_step_count)
        self.initial_lr = float(initial_lr)
        self.step()

    def learning_rate(self, step: int) -> float:
        return learning_rate(
            self.schedule, step, self.initial_lr, self.warmup_step_count, self.total_step_count
        )

    def step(self) -> None:
        self._optimizer.set_learning_rate(self.learning_rate(self._optimizer.step_count))


class LinearLRScheduler(LRScheduler):
    """onnxruntime-training's: linear warm-up from 0 to ``initial_lr`` over ``warmup_step_count``
    steps, then linear decay to 0 at ``total_step_count`` (its 1.19 Python class passes warm-up
    and total in swapped positions to its C++ one; this takes them as named)."""

    def __init__(
        self, optimizer: Optimizer, warmup_step_count: int, total_step_count: int, initial_lr: float
    ):
        super().__init__(optimizer, "linear", warmup_step_count, total_step_count, initial_lr)
