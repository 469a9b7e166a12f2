"""RmsNormGrad at LLM activation sizes: reads dy, x, rstd and gamma, writes dx and dgamma."""

from __future__ import annotations

import numpy as np

from . import peers
from .rms_norm import cases, torch_rms_norm
from .runner import Case, random

__all__ = ["PEERS", "cases", "make"]

PEERS = (
    "PyTorch: the backward alone of `F.rms_norm(x, [cols], gamma)` (graph built once, "
    "`torch.autograd.grad(y, [x, gamma], dy, retain_graph=True)`), gamma in x's dtype."
)


def make(case: tuple[int, int, str]) -> Case:
    rows, cols, dtype = case
    rng = np.random.default_rng(0)
    inputs = {
        "dy": random((rows, cols), dtype, rng),
        "x": random((rows, cols), dtype, rng),
        "rstd": rng.uniform(0.5, 2.0, (rows, 1)).astype(np.float32),
        "gamma": random(cols, "float32", rng),
    }

    def torch_call():
        x, gamma = peers.tensors(inputs["x"], inputs["gamma"].astype(inputs["x"].dtype), requires_grad=True)
        (dy,) = peers.tensors(inputs["dy"])
        return peers.backward(torch_rms_norm(x, gamma), [x, gamma], dy)

    return Case("RmsNormGrad", f"RmsNormGrad {rows}x{cols} {dtype}", dtype, inputs, torch=torch_call)
