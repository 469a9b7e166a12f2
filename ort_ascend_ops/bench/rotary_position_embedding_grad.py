"""RotaryPositionEmbeddingGrad on BSND activations with a 1S1D table: reads dy (and x), writes dx
(and dcos, dsin)."""

from __future__ import annotations

import numpy as np

from .runner import DTYPES, bench_memory_bound

MODES = {0: "half", 1: "interleave", 2: "quarter", 3: "interleave-half"}


def cases(quick: bool) -> list[tuple[tuple[int, ...], str, int, bool]]:
    shape = (1, 64, 4, 128) if quick else (4, 4096, 32, 128)  # B, S, N, D
    return [(shape, dtype, mode, with_x) for dtype in DTYPES for mode in MODES for with_x in (False, True)]


def run(case: tuple[tuple[int, ...], str, int, bool], threads: int, repeats: int):
    (b, s, n, d), dtype_name, mode, with_x = case
    rng = np.random.default_rng(0)
    dtype = DTYPES[dtype_name]
    inputs = {
        "dy": rng.standard_normal((b, s, n, d), np.float32).astype(dtype),
        "cos": rng.standard_normal((1, s, 1, d), np.float32).astype(dtype),
        "sin": rng.standard_normal((1, s, 1, d), np.float32).astype(dtype),
    }
    if with_x:
        inputs["x"] = rng.standard_normal((b, s, n, d), np.float32).astype(dtype)
    label = f"RoPEGrad {b}x{s}x{n}x{d} {dtype_name} {MODES[mode]}{' +x' if with_x else ''}"
    return bench_memory_bound(
        "RotaryPositionEmbeddingGrad", label, inputs, threads, repeats, attrs={"mode": mode}
    )
