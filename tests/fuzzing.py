"""What the fuzz strategies of every op (``valid`` and ``invalid`` in tests/cases/<op>.py) are
made of: valid calls (random ranks, shapes with empty and size-1 axes, dtypes, attributes,
layouts, thread counts) carry their float64 oracle check, and invalid ones (one contract rule
broken) the library must refuse with an ONNX Runtime error naming the op. Array contents come from
a drawn seed, so hypothesis shrinks geometry, not numbers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from oracles import BF16, F16, F32, assert_close

FLOATS = [F32, F16, BF16]
INT32_EXTREMES = [np.iinfo(np.int32).min, np.iinfo(np.int32).min + 1, -2, np.iinfo(np.int32).max]
INT64_EXTREMES = [*INT32_EXTREMES, np.iinfo(np.int64).min, np.iinfo(np.int64).max, 2**32, -(2**32)]


@dataclass
class Valid:
    """A call that must match the oracle: ``check(outputs)`` raises if it does not."""

    op: str
    inputs: dict
    attrs: dict
    outputs: list[str] | None
    check: Callable
    threads: int = 1


@dataclass
class Invalid:
    """A call that breaks one rule: the error must name the op and ``names`` (an input or
    attribute), when given. ``outputs`` maps the node's output names to NumPy dtypes."""

    op: str
    inputs: dict
    attrs: dict
    outputs: dict
    names: str | None = None


def rngs():
    return st.integers(0, 2**32 - 1).map(np.random.default_rng)


def extent(high=4):
    """An axis length: empty and size-1 axes come up often."""
    return st.one_of(st.sampled_from([0, 1]), st.integers(0, high))


def random(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def close(out, ref, tol, scale=None):
    """||out - ref|| <= tol * ||scale|| (scale: ref itself, or the same sums taken over absolute
    values where the formula cancels)."""
    out = np.asarray(out)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    if scale is None:
        return assert_close(out, ref, tol)
    err = np.linalg.norm(out.astype(np.float64) - ref)
    assert err <= tol * np.linalg.norm(scale), f"error {err:.3g} > {tol} * {np.linalg.norm(scale):.3g}"
