"""ApplyAdamW on parameters of LLM sizes: reads param, exp_avg, exp_avg_sq and grad, writes the
first three (memory-bound, roof: copy)."""

from __future__ import annotations

import numpy as np

from . import peers
from .runner import Case, random

PEERS = (
    "PyTorch: `torch.optim.AdamW([p], lr=1e-3)` (its default foreach path on the CPU), `step()` "
    "with the same gradient; ORT has no optimizer op."
)


def cases(quick: bool, dtypes: tuple[str, ...]) -> list[tuple[int, str]]:
    """(elements, dtype): a norm's gamma, an attention projection, a small embedding table."""
    sizes = [1 << 20] if quick else [4096, 1 << 22, 1 << 24]
    return [(n, dtype) for n in sizes for dtype in dtypes]


def make(case: tuple[int, str]) -> Case:
    n, dtype = case
    rng = np.random.default_rng(0)
    inputs = {
        "param": random(n, dtype, rng),
        "exp_avg": random(n, dtype, rng),
        "exp_avg_sq": np.abs(random(n, dtype, rng)),
        "grad": random(n, dtype, rng),
        "step": np.array([10], np.int64),
        "lr": np.array([1e-3], np.float32),
    }

    def torch_call():
        torch = peers.torch_module()
        (param,) = peers.tensors(inputs["param"])
        parameter = torch.nn.Parameter(param)
        parameter.grad = peers.tensors(inputs["grad"])[0]
        optimizer = torch.optim.AdamW([parameter], lr=1e-3)
        return optimizer.step

    return Case("ApplyAdamW", f"ApplyAdamW {n} {dtype}", dtype, inputs, {}, torch=torch_call)
