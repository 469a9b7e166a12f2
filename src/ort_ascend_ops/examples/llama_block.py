"""A small Llama-style decoder block and its training graph.

```
h    = x + Attention(RmsNorm(x, attn_norm))      # Q/K/V projections, RoPE (mode 0) on Q and K,
                                                 # causal softmax attention, output projection
out  = h + SwiGLU(RmsNorm(h, mlp_norm))          # (silu(n @ w_gate) * (n @ w_up)) @ w_down
loss = mean((out - target)^2)
```

``RmsNorm`` and ``RotaryPositionEmbedding`` are this package's ops (their training graph uses
``RmsNormGrad`` and ``RotaryPositionEmbeddingGrad``); the rest is standard ONNX (opset 23).

The weights are graph inputs, not initializers: a training loop feeds the current values at each
step and reads their gradients back (``<name>_grad`` outputs), and the saved files stay a few KB.
``example_inputs`` gives deterministic initial values. Every graph input:

| input | shape | |
|---|---|---|
| x, target | `[B, S, H]` | block input, regression target |
| cos, sin | `[1, S, 1, Dh]` | RoPE tables (mode 0, half), broadcast over batch and heads (BSND) |
| attn_norm, mlp_norm | `[H]` | RmsNorm gammas |
| wq, wk, wv, wo | `[H, H]` | attention projections (`y = x @ w`), H = heads * Dh |
| w_gate, w_up | `[H, M]`, w_down `[M, H]` | SwiGLU MLP |

The causal mask is a constant inside the graph: 0 on and below the diagonal, -1e9 above (exactly
zero weight after Softmax in float32).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnxscript import FLOAT, script

from ..opschema import register_schemas
from ..reference._opset import ascend, op
from ..training import build_training_model
from . import finish, to_model

WEIGHTS = ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down")
WRT = WEIGHTS
LOSS = "loss"
EPSILON = 1e-6
MASK_VALUE = -1e9


@dataclass(frozen=True)
class Config:
    batch: int = 2
    seq: int = 8
    heads: int = 4
    head_dim: int = 8
    mlp: int = 64
    rope_base: float = 10000.0

    @property
    def hidden(self) -> int:
        return self.heads * self.head_dim

    def describe(self) -> str:
        return (
            f"B={self.batch} S={self.seq} H={self.hidden} ({self.heads} heads x {self.head_dim}), "
            f"MLP {self.mlp}, float32"
        )


def causal_mask(seq: int) -> np.ndarray:
    """``[S, S]`` additive mask: 0 where key <= query, ``MASK_VALUE`` elsewhere."""
    return np.where(np.tril(np.ones((seq, seq), dtype=bool)), 0.0, MASK_VALUE).astype(np.float32)


def rope_tables(seq: int, head_dim: int, base: float = 10000.0) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin for RoPE mode 0 (half): angle ``pos * base^(-2i/Dh)`` repeated over both
    halves, shaped ``[1, S, 1, Dh]`` to broadcast over BSND."""
    inv_freq = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(seq, dtype=np.float64), inv_freq)
    angles = np.concatenate([angles, angles], axis=-1)[None, :, None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def forward_model(config: Config = Config()) -> onnx.ModelProto:
    """The forward block: inputs as in the module docstring, one output ``loss`` (a scalar)."""
    register_schemas()
    B, S, N, Dh, M = config.batch, config.seq, config.heads, config.head_dim, config.mlp
    H = config.hidden
    bsnd = [B, S, N, Dh]
    bsh = [B, S, H]
    scale = float(Dh) ** -0.5
    mask = onnx.numpy_helper.from_array(causal_mask(S), "mask")

    @script(default_opset=op)
    def llama_block(
        x: FLOAT,
        target: FLOAT,
        cos: FLOAT,
        sin: FLOAT,
        attn_norm: FLOAT,
        wq: FLOAT,
        wk: FLOAT,
        wv: FLOAT,
        wo: FLOAT,
        mlp_norm: FLOAT,
        w_gate: FLOAT,
        w_up: FLOAT,
        w_down: FLOAT,
    ) -> FLOAT:
        # Attention.
        xn, x_rstd = ascend.RmsNorm(x, attn_norm, epsilon=EPSILON)
        heads_shape = op.Constant(value_ints=bsnd)
        q = op.Reshape(op.MatMul(xn, wq), heads_shape)
        k = op.Reshape(op.MatMul(xn, wk), heads_shape)
        v = op.Reshape(op.MatMul(xn, wv), heads_shape)
        q_rot = ascend.RotaryPositionEmbedding(q, cos, sin, mode=0)
        k_rot = ascend.RotaryPositionEmbedding(k, cos, sin, mode=0)
        q_h = op.Transpose(q_rot, perm=[0, 2, 1, 3])  # [B, N, S, Dh]
        k_t = op.Transpose(k_rot, perm=[0, 2, 3, 1])  # [B, N, Dh, S]
        v_h = op.Transpose(v, perm=[0, 2, 1, 3])
        scores = op.MatMul(q_h, k_t) * op.Constant(value_float=scale) + op.Constant(value=mask)
        probs = op.Softmax(scores, axis=-1)
        context = op.Transpose(op.MatMul(probs, v_h), perm=[0, 2, 1, 3])  # [B, S, N, Dh]
        attn = op.MatMul(op.Reshape(context, op.Constant(value_ints=bsh)), wo)
        h = x + attn
        # SwiGLU MLP.
        hn, h_rstd = ascend.RmsNorm(h, mlp_norm, epsilon=EPSILON)
        gate = op.MatMul(hn, w_gate)
        up = op.MatMul(hn, w_up)
        act = gate * op.Sigmoid(gate) * up
        out = h + op.MatMul(act, w_down)
        # Mean squared error.
        diff = out - target
        loss = op.ReduceMean(diff * diff, keepdims=0)
        return loss

    shapes = {
        "x": bsh,
        "target": bsh,
        "cos": [1, S, 1, Dh],
        "sin": [1, S, 1, Dh],
        "attn_norm": [H],
        "wq": [H, H],
        "wk": [H, H],
        "wv": [H, H],
        "wo": [H, H],
        "mlp_norm": [H],
        "w_gate": [H, M],
        "w_up": [H, M],
        "w_down": [M, H],
    }
    return to_model(
        llama_block,
        shapes,
        {"loss": []},
        "Llama-style decoder block, MSE loss (ort_ascend_ops.examples.llama_block)",
    )


def build(config: Config = Config()) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """The forward model and its training model (outputs ``loss`` and ``<weight>_grad`` for
    every weight)."""
    forward = forward_model(config)
    training = build_training_model(forward, LOSS, list(WRT))
    return forward, finish(
        training, "Training graph of the Llama-style block: loss and every weight's gradient"
    )


def example_inputs(rng: np.random.Generator, config: Config = Config()) -> dict[str, np.ndarray]:
    """Every graph input, float32: unit-normal x and target, the RoPE tables, gammas near 1 and
    projections scaled by 1/sqrt(fan_in)."""
    B, S, H, M = config.batch, config.seq, config.hidden, config.mlp
    cos, sin = rope_tables(S, config.head_dim, config.rope_base)

    def normal(*shape, scale=1.0):
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    return {
        "x": normal(B, S, H),
        "target": normal(B, S, H),
        "cos": cos,
        "sin": sin,
        "attn_norm": 1 + normal(H, scale=0.1),
        "wq": normal(H, H, scale=H**-0.5),
        "wk": normal(H, H, scale=H**-0.5),
        "wv": normal(H, H, scale=H**-0.5),
        "wo": normal(H, H, scale=H**-0.5),
        "mlp_norm": 1 + normal(H, scale=0.1),
        "w_gate": normal(H, M, scale=H**-0.5),
        "w_up": normal(H, M, scale=H**-0.5),
        "w_down": normal(M, H, scale=M**-0.5),
    }
