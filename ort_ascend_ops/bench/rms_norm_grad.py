"""RmsNormGrad at LLM activation sizes: reads dy and x, writes dx."""

from __future__ import annotations

import numpy as np

from .runner import DTYPES, bench_memory_bound, row_cases

cases = row_cases


def run(case: tuple[int, int, str], threads: int, repeats: int):
    rows, cols, dtype_name = case
    rng = np.random.default_rng(0)
    dtype = DTYPES[dtype_name]
    inputs = {
        "dy": rng.standard_normal((rows, cols), np.float32).astype(dtype),
        "x": rng.standard_normal((rows, cols), np.float32).astype(dtype),
        "rstd": rng.uniform(0.5, 2.0, (rows, 1)).astype(np.float32),
        "gamma": rng.standard_normal(cols, np.float32),
    }
    return bench_memory_bound(
        "RmsNormGrad", f"RmsNormGrad {rows}x{cols} {dtype_name}", inputs, threads, repeats
    )
