"""RmsNorm at LLM activation sizes: reads x and gamma, writes y and rstd."""

from __future__ import annotations

import numpy as np

from . import peers
from .runner import Case, random

PEERS = (
    "PyTorch: `F.rms_norm(x, [cols], gamma, 1e-6)` under `no_grad`, gamma in x's dtype. "
    "ORT std op: `RMSNormalization` (opset 23, axis=-1) on the same x, gamma in x's dtype; it writes no rstd."
)
EPSILON = 1e-6


def cases(quick: bool, dtypes: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """(rows, cols, dtype): tokens x hidden size, from one small batch to a long sequence."""
    shapes = [(64, 4096)] if quick else [(64, 4096), (1024, 4096), (8192, 4096), (2048, 8192)]
    return [(rows, cols, dtype) for rows, cols in shapes for dtype in dtypes]


def torch_rms_norm(x, gamma):
    return peers.torch_module().nn.functional.rms_norm(x, gamma.shape, gamma, EPSILON)


def make(case: tuple[int, int, str]) -> Case:
    rows, cols, dtype = case
    rng = np.random.default_rng(0)
    inputs = {"x": random((rows, cols), dtype, rng), "gamma": random(cols, "float32", rng)}

    def torch_call():
        x, gamma = peers.tensors(inputs["x"], inputs["gamma"].astype(inputs["x"].dtype))
        return peers.forward(torch_rms_norm, x, gamma)

    def standard():  # its output takes gamma's type: gamma in x's dtype, as for PyTorch
        std_inputs = {"x": inputs["x"], "gamma": inputs["gamma"].astype(inputs["x"].dtype)}
        return peers.standard_model("RMSNormalization", std_inputs, axis=-1, epsilon=EPSILON), std_inputs

    return Case(
        "RmsNorm",
        f"RmsNorm {rows}x{cols} {dtype}",
        dtype,
        inputs,
        {"epsilon": EPSILON},
        torch=torch_call,
        standard=standard,
    )
