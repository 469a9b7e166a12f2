"""FlashAttentionScoreGrad at FlashAttentionScore's geometries (see there). Five GEMMs per tile:
the scores recomputed, dV, dP, dQ and dK."""

from __future__ import annotations

import numpy as np

from ..op_model import make_op_model
from ..runtime import make_session
from . import peers
from .flash_attention_score import attrs_for, inputs_for, matmul_flops, torch_attention
from .flash_attention_score import cases as cases  # the forward's geometries
from .runner import Case

PEERS = (
    "PyTorch: the backward alone (graph built once) of `scaled_dot_product_attention(..., "
    "enable_gqa=True)` with respect to query, key and value."
)


def forward_outputs(inputs: dict[str, np.ndarray], attrs: dict) -> dict[str, np.ndarray]:
    """softmax_max, softmax_sum and attention_in as training hands them to the grad: our
    FlashAttentionScore's outputs on the same inputs (no peer needed to make a case)."""
    given = {name: inputs[name] for name in ("query", "key", "value")}
    model = make_op_model("FlashAttentionScore", {n: (a.dtype, a.shape) for n, a in given.items()}, attrs)
    attention_out, softmax_max, softmax_sum = make_session(model).run(given)
    return {"softmax_max": softmax_max, "softmax_sum": softmax_sum, "attention_in": attention_out}


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
