"""RmsNorm at LLM activation sizes: reads x, writes y."""

from __future__ import annotations

import numpy as np

from .runner import DTYPES, bench_memory_bound, row_cases

cases = row_cases


def run(case: tuple[int, int, str], threads: int, repeats: int):
    rows, cols, dtype_name = case
    rng = np.random.default_rng(0)
    inputs = {
        "x": rng.standard_normal((rows, cols), np.float32).astype(DTYPES[dtype_name]),
        "gamma": rng.standard_normal(cols, np.float32),
    }
    return bench_memory_bound("RmsNorm", f"RmsNorm {rows}x{cols} {dtype_name}", inputs, threads, repeats)
