"""RotaryPositionEmbedding on BSND activations with a 1S1D table: reads x, cos and sin, writes y."""

from __future__ import annotations

import numpy as np

from . import peers
from .runner import Case, random

PEERS = (
    "PyTorch: `x * cos + rotate(x) * sin` in x's dtype under `no_grad` (rotate as in the op's "
    "reference: `cat(-x2, x1)` of the halves and its interleaved, quarter and de-interleaved "
    "variants). ORT std op: `RotaryEmbedding` (opset 23, modes 0 and 1 as `interleaved` 0 and 1) "
    "on x seen as its 3-D input `[B, S, N*D]` with `num_heads=N` (the same memory as BSND; its 4-D "
    "input is BNSD), half-width `[S, D/2]` caches and `position_ids = arange(S)`."
)
MODES = {0: "half", 1: "interleave", 2: "quarter", 3: "interleave-half"}
# B, S, N, D: Llama-7B's 32 heads of 128, from a short prompt to a batch of 4 long sequences.
SHAPES = [(1, 128, 32, 128), (1, 1024, 32, 128), (1, 4096, 32, 128), (4, 4096, 32, 128)]


def ladder(quick: bool) -> list[tuple[tuple[int, ...], int]]:
    """(shape, mode): the common modes 0 and 1 along the ladder, every mode at 1x4096x32x128, well
    beyond the caches (at 4x4096x32x128 PyTorch's peer alone would take minutes over the modes)."""
    if quick:
        return [(SHAPES[0], mode) for mode in (0, 1)]
    return [(shape, mode) for shape in SHAPES for mode in (MODES if shape == SHAPES[2] else (0, 1))]


def cases(quick: bool, dtypes: tuple[str, ...]) -> list[tuple[tuple[int, ...], str, int]]:
    return [(shape, dtype, mode) for shape, mode in ladder(quick) for dtype in dtypes]


def tables(s: int, d: int, dtype: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"cos": random((1, s, 1, d), dtype, rng), "sin": random((1, s, 1, d), dtype, rng)}


def torch_rope(x, cos, sin, mode: int):
    """The op's formula in PyTorch: y = P(x) * cos + rotate(P(x)) * sin."""
    torch = peers.torch_module()
    if mode == 3:  # de-interleave, then as mode 0
        x = torch.cat((x[..., ::2], x[..., 1::2]), -1)
    if mode == 1:
        rotated = torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2)
    else:  # the halves (u, v) of every block (one, or two for mode 2) become (-v, u)
        parts = x.chunk(4 if mode == 2 else 2, -1)
        rotated = torch.cat([p for u, v in zip(parts[::2], parts[1::2], strict=True) for p in (-v, u)], -1)
    return x * cos + rotated * sin


def make(case: tuple[tuple[int, ...], str, int]) -> Case:
    (b, s, n, d), dtype, mode = case
    rng = np.random.default_rng(0)
    inputs = {"x": random((b, s, n, d), dtype, rng), **tables(s, d, dtype, rng)}

    def torch_call():
        return peers.forward(torch_rope, *peers.tensors(inputs["x"], inputs["cos"], inputs["sin"]), mode)

    def standard():
        if mode not in (0, 1):
            raise ValueError("RotaryEmbedding has modes 0 (half) and 1 (interleaved) only")
        std_inputs = {
            "X": inputs["x"].reshape(b, s, n * d),
            "cos_cache": np.ascontiguousarray(inputs["cos"][0, :, 0, : d // 2]),
            "sin_cache": np.ascontiguousarray(inputs["sin"][0, :, 0, : d // 2]),
            "position_ids": np.broadcast_to(np.arange(s, dtype=np.int64), (b, s)).copy(),
        }
        model = peers.standard_model("RotaryEmbedding", std_inputs, num_heads=n, interleaved=mode)
        return model, std_inputs

    label = f"RoPE {b}x{s}x{n}x{d} {dtype} {MODES[mode]}"
    return Case(
        "RotaryPositionEmbedding", label, dtype, inputs, {"mode": mode}, torch=torch_call, standard=standard
    )
