"""RotaryPositionEmbedding on BSND activations with a 1S1D table: reads x, writes y."""

from __future__ import annotations

import numpy as np

from .rotary_position_embedding_grad import MODES
from .runner import DTYPES, bench_memory_bound


def cases(quick: bool) -> list[tuple[tuple[int, ...], str, int]]:
    shape = (1, 64, 4, 128) if quick else (4, 4096, 32, 128)  # B, S, N, D
    return [(shape, dtype, mode) for dtype in DTYPES for mode in (0, 1)]


def run(case: tuple[tuple[int, ...], str, int], threads: int, repeats: int):
    (b, s, n, d), dtype_name, mode = case
    rng = np.random.default_rng(0)
    dtype = DTYPES[dtype_name]
    inputs = {
        "x": rng.standard_normal((b, s, n, d), np.float32).astype(dtype),
        "cos": rng.standard_normal((1, s, 1, d), np.float32).astype(dtype),
        "sin": rng.standard_normal((1, s, 1, d), np.float32).astype(dtype),
    }
    label = f"RoPE {b}x{s}x{n}x{d} {dtype_name} {MODES[mode]}"
    return bench_memory_bound(
        "RotaryPositionEmbedding", label, inputs, threads, repeats, attrs={"mode": mode}
    )
