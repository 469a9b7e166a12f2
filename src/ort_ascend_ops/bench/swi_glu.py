"""SwiGlu over an MLP's merged gate/up product: reads x once, writes half of it (memory-bound,
roof: copy)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from . import peers
from .runner import Case, random

PEERS = (
    "PyTorch: `silu(gate) * up` of `x.chunk(2, -1)`, transformers' LlamaMLP; ORT: Split, Sigmoid "
    "and two Muls in float32, the standard ops the decomposed export runs."
)


def cases(quick: bool, dtypes: tuple[str, ...]) -> list[tuple[int, int, str]]:
    """(tokens, intermediate, dtype): a Llama-3-8B MLP (intermediate 14336) at 512 and 4096 tokens."""
    shapes = [(512, 14336)] if quick else [(512, 14336), (4096, 14336)]
    return [(t, i, dtype) for t, i in shapes for dtype in dtypes]


def _standard(inputs: dict[str, np.ndarray]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    x = inputs["x"]
    f32 = TensorProto.FLOAT
    nodes = [
        helper.make_node("Cast", ["x"], ["xf"], to=f32),
        helper.make_node("Split", ["xf"], ["a", "b"], axis=-1, num_outputs=2),
        helper.make_node("Sigmoid", ["a"], ["s"]),
        helper.make_node("Mul", ["a", "s"], ["silu"]),
        helper.make_node("Mul", ["silu", "b"], ["yf"]),
        helper.make_node("Cast", ["yf"], ["y"], to=helper.np_dtype_to_tensor_dtype(x.dtype)),
    ]
    return peers.standard_graph(
        nodes, inputs, {"y": (x.dtype, (x.shape[0], x.shape[1] // 2))}, "swi_glu"
    ), inputs


def make(case: tuple[int, int, str]) -> Case:
    tokens, inter, dtype = case
    inputs = {"x": random((tokens, 2 * inter), dtype, np.random.default_rng(0))}

    def torch_call():
        torch = peers.torch_module()
        (x,) = peers.tensors(inputs["x"])

        def swi_glu(x):
            gate, up = x.chunk(2, dim=-1)
            return torch.nn.functional.silu(gate) * up

        return peers.forward(swi_glu, x)

    return Case(
        "SwiGlu",
        f"SwiGlu {tokens}x{2 * inter} {dtype}",
        dtype,
        inputs,
        {},
        torch=torch_call,
        standard=lambda: _standard(inputs),
    )
