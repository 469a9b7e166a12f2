"""LightningIndexerGrad at DeepSeek's geometry: B=1, N1=64, D=128, K=2048, S2=8192, S1 query
tokens from 16 to 128, sparse_mode 0. Three GEMMs per token on its gathered key rows."""

from __future__ import annotations

import numpy as np

from . import peers
from .runner import Case, random

PEERS = (
    "PyTorch: the backward alone (graph built once, with respect to query, key and weights) of "
    "the selected scores `(relu(einsum(query, key[idx])) * weights).sum(heads)`."
)


def cases(quick: bool, dtypes: tuple[str, ...]) -> list[tuple[int, int, int, int, int, str]]:
    """(S1, S2, N1, D, K, dtype)."""
    geometries = [(16, 512, 8, 64, 128)] if quick else [(s1, 8192, 64, 128, 2048) for s1 in (16, 32, 64, 128)]
    return [(*geometry, dtype) for geometry in geometries for dtype in dtypes]


def inputs_for(s1: int, s2: int, n1: int, d: int, k: int, dtype: str) -> dict[str, np.ndarray]:
    """Random BSND inputs (B = 1) whose indices select k distinct keys per token."""
    rng = np.random.default_rng(0)
    return {
        "query": random((1, s1, n1, d), dtype, rng),
        "key": random((1, s2, 1, d), dtype, rng),
        "dy": random((1, s1, k), dtype, rng),
        "sparse_indices": np.stack([rng.permutation(s2)[:k] for _ in range(s1)])[None].astype(np.int32),
        "weights": random((1, s1, n1), dtype, rng),
    }


def torch_selected_scores(query, key, weights, indices):
    """y[b, s, k] = sum_j weights[b, s, j] * relu(query[b, s, j] . key[b, indices[b, s, k]])."""
    torch = peers.torch_module()
    batch = torch.arange(key.shape[0])[:, None, None]
    scores = torch.einsum("bsjd,bskd->bsjk", query, key[:, :, 0][batch, indices])
    return (torch.relu(scores) * weights[..., None]).sum(2)


def make(case: tuple[int, int, int, int, int, str]) -> Case:
    s1, s2, n1, d, k, dtype = case
    inputs = inputs_for(s1, s2, n1, d, k, dtype)

    def torch_call():
        query, key, weights = peers.tensors(
            inputs["query"], inputs["key"], inputs["weights"], requires_grad=True
        )
        dy, indices = peers.tensors(inputs["dy"], inputs["sparse_indices"])
        y = torch_selected_scores(query, key, weights, indices)
        return peers.backward(y, [query, key, weights], dy)

    return Case(
        "LightningIndexerGrad",
        f"IndexerGrad S1={s1} S2={s2} N1={n1} K={k} {dtype}",
        dtype,
        inputs,
        {"head_num": n1, "layout": "BSND", "sparse_mode": 0},
        flops=3 * 2 * s1 * n1 * k * d,  # scores, d_query and d_key products
        torch=torch_call,
    )
