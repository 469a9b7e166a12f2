"""FlashAttentionScore at a Llama's geometry: B=1, 8 query heads over 2 key-value heads, D 64
and 128, S from 1024 to 4096, BNSD, causal (sparse_mode 3) and unmasked. Two GEMMs per tile."""

from __future__ import annotations

import numpy as np

from . import peers
from .runner import Case, random

PEERS = (
    "PyTorch: `scaled_dot_product_attention(q, k, v, is_causal=..., scale=..., enable_gqa=True)` "
    "forward without autograd; ONNX Runtime: the standard `Attention` (opset 23) on the same "
    "BNSD tensors."
)
N1, N2 = 8, 2


def cases(quick: bool, dtypes: tuple[str, ...]) -> list[tuple[int, int, int, str]]:
    """(S, D, sparse_mode, dtype): S1 = S2 = S."""
    geometries = (
        [(256, 64, 3)] if quick else [(s, d, m) for s in (1024, 4096) for d in (64, 128) for m in (3, 0)]
    )
    return [(*geometry, dtype) for geometry in geometries for dtype in dtypes]


def inputs_for(s: int, d: int, dtype: str, grad: bool = False) -> dict[str, np.ndarray]:
    """Random BNSD query, key and value (with dy for the grad)."""
    rng = np.random.default_rng(0)
    names = ("query", "key", "value", "dy") if grad else ("query", "key", "value")
    heads = {"query": N1, "dy": N1, "key": N2, "value": N2}
    return {name: random((1, heads[name], s, d), dtype, rng) for name in names}


# 1/sqrt(64) for every D: the time does not depend on it, and the cliff pairs (D 128 and 136)
# then differ in the width alone.
SCALE = 0.125


def attrs_for(mode: int) -> dict:
    return {"head_num": N1, "input_layout": "BNSD", "scale_value": SCALE, "sparse_mode": mode}


def torch_attention(query, key, value, causal: bool, scale: float):
    torch = peers.torch_module()
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, is_causal=causal, scale=scale, enable_gqa=True
    )


def matmul_flops(s: int, d: int, mode: int, products: int) -> float:
    """The useful work: ``products`` [S, S] x D GEMMs per query head, halved by the causal mask."""
    return products * 2 * N1 * s * s * d * (0.5 if mode == 3 else 1.0)


def make(case: tuple[int, int, int, str]) -> Case:
    s, d, mode, dtype = case
    inputs = inputs_for(s, d, dtype)
    attrs = attrs_for(mode)

    def torch_call():
        query, key, value = peers.tensors(inputs["query"], inputs["key"], inputs["value"])
        return peers.forward(torch_attention, query, key, value, mode == 3, attrs["scale_value"])

    def standard():
        model = peers.standard_model(
            "Attention",
            inputs,
            q_num_heads=N1,
            kv_num_heads=N2,
            scale=attrs["scale_value"],
            is_causal=int(mode == 3),
        )
        return model, inputs

    return Case(
        "FlashAttentionScore",
        f"FlashAttention S={s} D={d} {'causal' if mode == 3 else 'full'} {dtype}",
        dtype,
        inputs,
        attrs,
        flops=matmul_flops(s, d, mode, 2),
        torch=torch_call,
        standard=standard,
    )
