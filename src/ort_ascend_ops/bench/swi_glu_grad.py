"""SwiGluGrad over an MLP's merged gate/up product: reads x and dy, writes dx (memory-bound, roof:
copy)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from . import peers
from .runner import Case, random
from .swi_glu import cases

__all__ = ["PEERS", "cases", "make"]

PEERS = (
    "PyTorch: autograd's backward of `silu(gate) * up` (SiLU's backward and two products); ORT: "
    "the standard ops of that backward in float32 (Split, Sigmoid, Sub, Mul, Add, Concat)."
)


def _standard(inputs: dict[str, np.ndarray]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    x = inputs["x"]
    f32 = TensorProto.FLOAT
    one = helper.make_tensor("one", f32, [], [1.0])
    nodes = [
        helper.make_node("Constant", [], ["one"], value=one),
        helper.make_node("Cast", ["x"], ["xf"], to=f32),
        helper.make_node("Cast", ["dy"], ["g"], to=f32),
        helper.make_node("Split", ["xf"], ["a", "b"], axis=-1, num_outputs=2),
        helper.make_node("Sigmoid", ["a"], ["s"]),
        helper.make_node("Sub", ["one", "s"], ["1-s"]),
        helper.make_node("Mul", ["a", "1-s"], ["a(1-s)"]),
        helper.make_node("Add", ["one", "a(1-s)"], ["1+a(1-s)"]),
        helper.make_node("Mul", ["s", "1+a(1-s)"], ["slope"]),
        helper.make_node("Mul", ["g", "b"], ["gb"]),
        helper.make_node("Mul", ["gb", "slope"], ["da"]),
        helper.make_node("Mul", ["a", "s"], ["silu"]),
        helper.make_node("Mul", ["g", "silu"], ["db"]),
        helper.make_node("Concat", ["da", "db"], ["dxf"], axis=-1),
        helper.make_node("Cast", ["dxf"], ["dx"], to=helper.np_dtype_to_tensor_dtype(x.dtype)),
    ]
    return peers.standard_graph(nodes, inputs, {"dx": (x.dtype, x.shape)}, "swi_glu_grad"), inputs


def make(case: tuple[int, int, str]) -> Case:
    tokens, inter, dtype = case
    rng = np.random.default_rng(0)
    # x first: the cliffs' pairs read the width of a case's first input, x's for both ops.
    inputs = {"x": random((tokens, 2 * inter), dtype, rng), "dy": random((tokens, inter), dtype, rng)}

    def torch_call():
        torch = peers.torch_module()
        (x,) = peers.tensors(inputs["x"], requires_grad=True)
        (dy,) = peers.tensors(inputs["dy"])
        gate, up = x.chunk(2, dim=-1)
        y = torch.nn.functional.silu(gate) * up
        return peers.backward(y, [x], dy)

    return Case(
        "SwiGluGrad",
        f"SwiGluGrad {tokens}x{2 * inter} {dtype}",
        dtype,
        inputs,
        {},
        torch=torch_call,
        standard=lambda: _standard(inputs),
    )
