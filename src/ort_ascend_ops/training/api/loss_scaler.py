"""Dynamic loss scaling, ``torch.amp.GradScaler``'s rules and state in one object: the scale the
next backward starts from, whether the gradients since the last reset hold an inf or a NaN, and
the update after each step. The module sets ``found_inf`` as it unscales, the optimizer skips a
step where it is set and calls ``update``; the checkpoint saves ``state_dict()``."""

from __future__ import annotations

import math


class LossScaler:
    """``GradScaler``'s defaults: start at ``init_scale``; a step whose gradients hold an inf or
    NaN is skipped and the scale multiplied by ``backoff_factor``; after ``growth_interval``
    finite steps in a row it is multiplied by ``growth_factor``."""

    def __init__(
        self,
        init_scale: float = 65536.0,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ):
        self._set(init_scale, growth_factor, backoff_factor, growth_interval, 0)
        self.found_inf = False  # since the gradients were last reset

    def _set(self, scale, growth_factor, backoff_factor, growth_interval, growth_tracker) -> None:
        if (
            not (math.isfinite(scale) and scale > 0 and math.isfinite(growth_factor) and growth_factor > 1)
            or not 0 < backoff_factor < 1
        ):
            raise ValueError(
                "LossScaler: needs a finite init_scale > 0, a finite growth_factor > 1 and "
                f"0 < backoff_factor < 1; got {scale}, {growth_factor}, {backoff_factor}"
            )
        if int(growth_interval) != growth_interval or growth_interval < 1:
            raise ValueError(f"LossScaler: growth_interval must be a positive integer, got {growth_interval}")
        if int(growth_tracker) != growth_tracker or not 0 <= growth_tracker < growth_interval:
            raise ValueError(
                f"LossScaler: the growth tracker must be an integer in [0, {growth_interval}), got {growth_tracker}"
            )
        self.scale, self.growth_factor, self.backoff_factor = (
            float(scale),
            float(growth_factor),
            float(backoff_factor),
        )
        self.growth_interval, self.growth_tracker = int(growth_interval), int(growth_tracker)

    def get_scale(self) -> float:
        return self.scale

    def update(self) -> None:
        """``GradScaler.update``: the scale after a step, skipped where ``found_inf`` is set."""
        if self.found_inf:
            self.scale, self.growth_tracker = self.scale * self.backoff_factor, 0
            return
        self.growth_tracker += 1
        if self.growth_tracker == self.growth_interval:
            self.scale, self.growth_tracker = self.scale * self.growth_factor, 0

    def state_dict(self) -> dict[str, float | int]:
        """``GradScaler.state_dict()``'s keys and values."""
        return {
            "scale": self.scale,
            "growth_factor": self.growth_factor,
            "backoff_factor": self.backoff_factor,
            "growth_interval": self.growth_interval,
            "_growth_tracker": self.growth_tracker,
        }

    def load_state_dict(self, state: dict) -> None:
        """A ``state_dict()`` (ours or ``GradScaler``'s); a checkpoint of before the rules were
        saved holds the scale and tracker alone, under ``growth_tracker``: the rules stay."""
        try:
            self._set(
                float(state["scale"]),
                float(state.get("growth_factor", self.growth_factor)),
                float(state.get("backoff_factor", self.backoff_factor)),
                state.get("growth_interval", self.growth_interval),
                state["_growth_tracker"] if "_growth_tracker" in state else state["growth_tracker"],
            )
        except (KeyError, TypeError) as error:
            raise ValueError(
                f"LossScaler: not a loss scaler's state ({type(error).__name__}: {error})"
            ) from None

    def __repr__(self) -> str:
        return f"LossScaler({self.state_dict()})"
