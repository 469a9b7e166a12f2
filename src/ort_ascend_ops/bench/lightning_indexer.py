"""LightningIndexer (score every key, keep the best K) at DeepSeek's geometry, sparse_mode 0."""

from __future__ import annotations

from . import peers
from .lightning_indexer_grad import cases, inputs_for
from .runner import Case

__all__ = ["PEERS", "cases", "make"]

PEERS = (
    "PyTorch: `(relu(einsum(query, key)) * weights).sum(heads).topk(K)` under `no_grad`, in the "
    "inputs' dtype."
)


def torch_indexer(query, key, weights, k: int):
    torch = peers.torch_module()
    scores = torch.einsum("bsjd,btd->bsjt", query, key[:, :, 0])
    return (torch.relu(scores) * weights[..., None]).sum(2).topk(k, -1)


def make(case: tuple[int, int, int, int, int, str]) -> Case:
    s1, s2, n1, d, k, dtype = case
    inputs = {
        name: a
        for name, a in inputs_for(s1, s2, n1, d, k, dtype).items()
        if name in ("query", "key", "weights")
    }

    def torch_call():
        return peers.forward(torch_indexer, *peers.tensors(*inputs.values()), k)

    return Case(
        "LightningIndexer",
        f"Indexer S1={s1} S2={s2} N1={n1} K={k} {dtype}",
        dtype,
        inputs,
        {"layout": "BSND", "sparse_mode": 0, "sparse_count": k},
        flops=2 * s1 * n1 * d * s2,  # every query head against every key
        torch=torch_call,
    )
