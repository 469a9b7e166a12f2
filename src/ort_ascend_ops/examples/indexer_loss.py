"""The DeepSeek indexer training loss and its training graph.

```
idx, I = LightningIndexer(query, key, weights)   # BSND, sparse_mode 3 (causal), K = sparse_count
valid  = idx != -1                               # slots past the allowed keys hold -1
loss   = sum_t KL(p_t || softmax(I_t over its valid slots))
       = sum over valid slots of p * (log p - log_softmax(I))
```

``p`` (``[B, S1, K]``) is the target distribution over each token's K selected slots (in DeepSeek
the main attention's distribution on the selected keys), zero on the invalid slots and summing to
1 over the valid ones. The loss's gradient w.r.t. the selected scores is ``softmax - p`` on the
valid slots and 0 on the others, so the training graph's backward runs through
``LightningIndexerGrad`` with exactly that ``dy``; the selection itself is not differentiable.

The loss is ``ort_ascend_ops.training.indexer_warmup.selection_kl``, the one DeepSeek-V3.2's
indexer warm-up (``indexer_warmup``) trains with: invalid slots contribute exactly 0, never a NaN.

The differentiated tensors (``query``, ``key``, ``weights``) are graph inputs, like ``p``; the
forward model also outputs ``sparse_indices`` (the selection, for checks with a fixed selection).
No scale is applied inside the indexer: DeepSeek folds ``N1^-0.5 * D^-0.5`` into ``weights``,
and ``example_inputs`` does the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnxscript import INT32, script

from ..opschema import register_schemas
from ..reference._opset import ascend, op
from ..training import build_training_model
from ..training.indexer_warmup import inline_selection_kl, selection_kl
from . import finish, to_model

WRT = ("query", "key", "weights")
LOSS = "loss"


@dataclass(frozen=True)
class Config:
    batch: int = 1
    seq_q: int = 8
    seq_k: int = 8
    heads: int = 4
    head_dim: int = 16
    top_k: int = 4

    def describe(self) -> str:
        return (
            f"B={self.batch} S1={self.seq_q} S2={self.seq_k} N1={self.heads} D={self.head_dim}, "
            f"top-{self.top_k} (BSND, sparse_mode 3), float32"
        )


def forward_model(config: Config = Config()) -> onnx.ModelProto:
    """The loss model: inputs ``query [B,S1,N1,D]``, ``key [B,S2,1,D]``, ``weights [B,S1,N1]``,
    ``p [B,S1,K]``; outputs ``loss`` (a scalar) and ``sparse_indices [B,S1,K]`` (int32)."""
    register_schemas()
    B, S1, S2, N, D, K = config.batch, config.seq_q, config.seq_k, config.heads, config.head_dim, config.top_k

    @script(default_opset=op)
    def indexer_loss(query, key, weights, p):
        sparse_indices, scores = ascend.LightningIndexer(
            query, key, weights, layout="BSND", sparse_mode=3, sparse_count=K
        )
        loss = selection_kl(sparse_indices, scores, p)
        return loss, sparse_indices

    return inline_selection_kl(
        to_model(
            indexer_loss,
            {"query": [B, S1, N, D], "key": [B, S2, 1, D], "weights": [B, S1, N], "p": [B, S1, K]},
            {"loss": [], "sparse_indices": [B, S1, K]},
            "DeepSeek indexer loss KL(p || softmax(selected scores)) (ort_ascend_ops.examples.indexer_loss)",
            output_types={"sparse_indices": INT32},
        )
    )


def build(config: Config = Config()) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """The forward model and its training model (outputs ``loss``, ``query_grad``, ``key_grad``
    and ``weights_grad``)."""
    forward = forward_model(config)
    training = build_training_model(forward, LOSS, list(WRT))
    return forward, finish(training, "Training graph of the DeepSeek indexer loss: loss and the gradients")


def valid_counts(config: Config = Config()) -> np.ndarray:
    """``[S1]``: the valid slots of each query position under sparse_mode 3,
    ``min(K, S2 - S1 + s + 1)`` clamped at 0."""
    s = np.arange(config.seq_q)
    return np.clip(np.minimum(config.top_k, config.seq_k - config.seq_q + s + 1), 0, None)


def example_inputs(
    rng: np.random.Generator, config: Config = Config(), ranked: bool = False
) -> dict[str, np.ndarray]:
    """Every graph input, float32: normal query and key, weights with DeepSeek's scale
    ``N1^-0.5 * D^-0.5`` folded in, and ``p`` a random distribution over each token's valid
    slots (zeros on the others). ``ranked`` sorts ``p`` in descending order over the slots, as
    the selected scores are: then the loss can approach 0 (a training demo's target)."""
    B, S1, S2, N, D, K = config.batch, config.seq_q, config.seq_k, config.heads, config.head_dim, config.top_k
    logits = rng.standard_normal((B, S1, K))
    valid = np.arange(K)[None, None, :] < valid_counts(config)[None, :, None]
    p = np.where(valid, np.exp(logits), 0.0)
    p /= np.maximum(p.sum(axis=-1, keepdims=True), 1e-300)
    if ranked:
        p = -np.sort(-p, axis=-1)  # zeros (invalid slots, always the last) stay last
    return {
        "query": rng.standard_normal((B, S1, N, D)).astype(np.float32),
        "key": rng.standard_normal((B, S2, 1, D)).astype(np.float32),
        "weights": ((N * D) ** -0.5 * rng.standard_normal((B, S1, N))).astype(np.float32),
        "p": p.astype(np.float32),
    }
