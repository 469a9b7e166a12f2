"""RotaryPositionEmbeddingGrad on BSND activations with a 1S1D table: reads dy, cos and sin (and
x), writes dx (and dcos, dsin)."""

from __future__ import annotations

import numpy as np

from . import peers
from .rotary_position_embedding import MODES, ladder, tables, torch_rope
from .runner import Case, random

PEERS = (
    "PyTorch: the backward alone of the forward's formula (graph built once, "
    "`torch.autograd.grad(y, wrt, dy, retain_graph=True)`), with respect to x, and also cos and "
    "sin (summed over the broadcast axes) for the `+x` rows that compute dcos and dsin."
)


def cases(quick: bool, dtypes: tuple[str, ...]) -> list[tuple[tuple[int, ...], str, int, bool]]:
    return [
        (shape, dtype, mode, with_x)
        for shape, mode in ladder(quick)
        for dtype in dtypes
        for with_x in (False, True)
    ]


def make(case: tuple[tuple[int, ...], str, int, bool]) -> Case:
    (b, s, n, d), dtype, mode, with_x = case
    rng = np.random.default_rng(0)
    inputs = {"dy": random((b, s, n, d), dtype, rng), **tables(s, d, dtype, rng)}
    x = random((b, s, n, d), dtype, rng)
    if with_x:
        inputs["x"] = x

    def torch_call():
        (xt,) = peers.tensors(x, requires_grad=True)
        cos, sin = peers.tensors(inputs["cos"], inputs["sin"], requires_grad=with_x)
        (dy,) = peers.tensors(inputs["dy"])
        return peers.backward(torch_rope(xt, cos, sin, mode), [xt, cos, sin] if with_x else [xt], dy)

    label = f"RoPEGrad {b}x{s}x{n}x{d} {dtype} {MODES[mode]}{' +x' if with_x else ''}"
    return Case("RotaryPositionEmbeddingGrad", label, dtype, inputs, {"mode": mode}, torch=torch_call)
