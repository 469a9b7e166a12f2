"""RmsNormGrad: reads dy and x, writes dx (rstd, gamma and dgamma are one row or column)."""

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
        "dy": rng.standard_normal((rows, cols), np.float32).astype(dtype),
        "x": rng.standard_normal((rows, cols), np.float32).astype(dtype),
        "rstd": rng.uniform(0.5, 2.0, (rows, 1)).astype(np.float32),
        "gamma": rng.standard_normal(cols, np.float32),
    }
    model = make_op_model("RmsNormGrad", {name: (a.dtype, a.shape) for name, a in inputs.items()})
    itemsize = np.dtype(dtype).itemsize
    nbytes = 3 * rows * cols * itemsize + 4 * (rows + 2 * cols)
    label = f"RmsNormGrad {rows}x{cols} {dtype_name}"
    return bench_memory_bound(label, model, inputs, nbytes, threads, repeats)
