"""LightningIndexerGrad at the aclnn page's geometry: B=1, N1=64, D=128, K=2048, S2=8192, on 128
query tokens. Three GEMMs per token on its gathered key rows."""

from __future__ import annotations

import numpy as np

from .runner import DTYPES, bench_compute_bound


def cases(quick: bool) -> list[tuple[int, int, int, int, int, str]]:
    geometry = (16, 512, 8, 64, 128) if quick else (128, 8192, 64, 128, 2048)  # S1, S2, N1, D, K
    return [(*geometry, dtype) for dtype in DTYPES]


def inputs_for(s1: int, s2: int, n1: int, d: int, k: int, dtype) -> dict[str, np.ndarray]:
    """Random BSND inputs (B = 1) whose indices select k distinct keys per token."""
    rng = np.random.default_rng(0)
    return {
        "query": rng.standard_normal((1, s1, n1, d), np.float32).astype(dtype),
        "key": rng.standard_normal((1, s2, 1, d), np.float32).astype(dtype),
        "dy": rng.standard_normal((1, s1, k), np.float32).astype(dtype),
        "sparse_indices": np.stack([rng.permutation(s2)[:k] for _ in range(s1)])[None].astype(np.int32),
        "weights": rng.standard_normal((1, s1, n1), np.float32).astype(dtype),
    }


def run(case: tuple[int, int, int, int, int, str], threads: int, repeats: int):
    s1, s2, n1, d, k, dtype_name = case
    inputs = inputs_for(s1, s2, n1, d, k, DTYPES[dtype_name])
    flops = 3 * 2 * s1 * n1 * k * d  # scores, d_query and d_key products
    attrs = {"head_num": n1, "layout": "BSND", "sparse_mode": 0}
    label = f"IndexerGrad S1={s1} S2={s2} N1={n1} K={k} {dtype_name}"
    return bench_compute_bound(
        "LightningIndexerGrad", label, inputs, flops, threads, max(3, repeats // 3), attrs
    )
