"""FlashAttentionScoreGrad at FlashAttentionScore's geometries (see there). Five GEMMs per tile:
the scores recomputed, dV, dP, dQ and dK."""

from __future__ import annotations

import numpy as np

from . import peers
from .flash_attention_score import attrs_for, inputs_for, matmul_flops, torch_attention
from .flash_attention_score import cases as cases  # the forward's geometries
from .runner import Case

PEERS = (
    "PyTorch: the backward alone (graph built once) of `scaled_dot_product_attention(..., "
    "enable_gqa=True)` with respect to query, key and value."
)


def forward_outputs(inputs: dict[str, np.ndarray], attrs: dict) -> dict[str, np.ndarray]:
    """softmax_max, softmax_sum and attention_in from PyTorch's float32 math on the same inputs:
    the statistics of the rows the grad reads."""
    torch = peers.torch_module()
    query, key, value = (torch.from_numpy(inputs[n].astype(np.float32)) for n in ("query", "key", "value"))
    group = query.shape[1] // key.shape[1]
    scores = attrs["scale_value"] * query @ key.repeat_interleave(group, 1).transpose(-1, -2)
    if attrs["sparse_mode"] == 3:
        s1, s2 = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(s1, s2, dtype=torch.bool).triu(s2 - s1 + 1), float("-inf"))
    row_max = scores.amax(-1, keepdim=True)
    row_sum = (scores - row_max).exp().sum(-1, keepdim=True)
    out = torch_attention(query, key, value, attrs["sparse_mode"] == 3, attrs["scale_value"])
    stats = (t.expand(*t.shape[:-1], 8).contiguous().numpy() for t in (row_max, row_sum))
    return dict(zip(("softmax_max", "softmax_sum"), stats, strict=True)) | {
        "attention_in": out.numpy().astype(inputs["query"].dtype)
    }


def make(case: tuple[int, int, int, str]) -> Case:
    s, d, mode, dtype = case
    given = inputs_for(s, d, dtype, grad=True)
    attrs = attrs_for(mode)
    inputs = given | forward_outputs(given, attrs)
    inputs = {
        name: inputs[name]
        for name in ("query", "key", "value", "dy", "softmax_max", "softmax_sum", "attention_in")
    }

    def torch_call():
        query, key, value = peers.tensors(inputs["query"], inputs["key"], inputs["value"], requires_grad=True)
        (dy,) = peers.tensors(inputs["dy"])
        y = torch_attention(query, key, value, mode == 3, attrs["scale_value"])
        return peers.backward(y, [query, key, value], dy)

    return Case(
        "FlashAttentionScoreGrad",
        f"FlashAttentionGrad S={s} D={d} {'causal' if mode == 3 else 'full'} {dtype}",
        dtype,
        inputs,
        attrs,
        flops=matmul_flops(s, d, mode, 5),
        torch=torch_call,
    )
