"""LightningIndexer (score every key, keep the best K) at the aclnn page's geometry, causal."""

from __future__ import annotations

from .lightning_indexer_grad import cases, inputs_for
from .runner import DTYPES, bench_compute_bound

__all__ = ["cases", "run"]


def run(case: tuple[int, int, int, int, int, str], threads: int, repeats: int):
    s1, s2, n1, d, k, dtype_name = case
    grad_inputs = inputs_for(s1, s2, n1, d, k, DTYPES[dtype_name])
    inputs = {name: grad_inputs[name] for name in ("query", "key", "weights")}
    # sparse_mode 3: token s of S1 scores the first s2 - s1 + s + 1 keys.
    flops = 2 * n1 * d * sum(s2 - s1 + s + 1 for s in range(s1))
    attrs = {"layout": "BSND", "sparse_mode": 3, "sparse_count": k}
    label = f"Indexer S1={s1} S2={s2} N1={n1} K={k} {dtype_name}"
    return bench_compute_bound("LightningIndexer", label, inputs, flops, threads, max(3, repeats // 3), attrs)
