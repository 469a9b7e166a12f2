"""RmsNorm: reads x, writes y (gamma and rstd are one row or column)."""

from __future__ import annotations

import numpy as np

from ..reference.model import make_op_model
from .elementwise import DTYPES, bench_memory_bound, row_cases

cases = row_cases


def run(case: tuple[int, int, str], threads: int, repeats: int):
    rows, cols, dtype_name = case
    dtype = DTYPES[dtype_name]
    rng = np.random.default_rng(0)
    inputs = {
        "x": rng.standard_normal((rows, cols), np.float32).astype(dtype),
        "gamma": rng.standard_normal(cols, np.float32),
    }
    model = make_op_model("RmsNorm", {name: (a.dtype, a.shape) for name, a in inputs.items()})
    nbytes = 2 * rows * cols * np.dtype(dtype).itemsize + 4 * (rows + cols)
    label = f"RmsNorm {rows}x{cols} {dtype_name}"
    return bench_memory_bound(label, model, inputs, nbytes, threads, repeats)
