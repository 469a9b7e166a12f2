"""NonFiniteCheckAndUnscale over a model's gradients in one buffer: reads them once, writes them
once (memory-bound, roof: copy)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from . import peers
from .runner import Case, random

PEERS = (
    "PyTorch: `torch._amp_foreach_non_finite_check_and_unscale_([g], found_inf, inv_scale)`, "
    "GradScaler.unscale_'s kernel; ORT: Mul, IsInf, IsNaN, Or and ReduceMax, the standard ops "
    "the same test takes."
)


def cases(quick: bool, dtypes: tuple[str, ...]) -> list[tuple[int, str]]:
    """(elements, dtype): a small model's gradients, a 1B model's layer, an embedding table."""
    sizes = [1 << 20] if quick else [1 << 16, 1 << 22, 1 << 24]
    return [(n, dtype) for n in sizes for dtype in dtypes]


def _standard(inputs: dict[str, np.ndarray]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    grads = inputs["scaled_grads"]
    elem = helper.np_dtype_to_tensor_dtype(grads.dtype)
    f32 = TensorProto.FLOAT
    nodes = [
        helper.make_node("Cast", ["scaled_grads"], ["g"], to=f32),
        helper.make_node("Mul", ["g", "inv_scale"], ["unscaled"]),
        helper.make_node("Cast", ["unscaled"], ["y"], to=elem),
        helper.make_node("IsInf", ["g"], ["inf"]),
        helper.make_node("IsNaN", ["g"], ["nan"]),
        helper.make_node("Or", ["inf", "nan"], ["bad"]),
        helper.make_node("Cast", ["bad"], ["flags"], to=f32),
        helper.make_node("ReduceMax", ["flags"], ["found"], keepdims=0),
    ]
    feeds = {"scaled_grads": grads, "inv_scale": inputs["inv_scale"]}
    outputs = {"y": (grads.dtype, grads.shape), "found": (np.float32, [])}
    return peers.standard_graph(nodes, feeds, outputs, "unscale"), feeds


def make(case: tuple[int, str]) -> Case:
    n, dtype = case
    rng = np.random.default_rng(0)
    inputs = {
        "scaled_grads": random(n, dtype, rng),
        "found_inf": np.zeros(1, np.float32),
        "inv_scale": np.array([1 / 65536], np.float32),
    }

    def torch_call():
        torch = peers.torch_module()
        (grads,) = peers.tensors(inputs["scaled_grads"])
        found, inv = torch.zeros(1), torch.from_numpy(inputs["inv_scale"])
        return lambda: torch._amp_foreach_non_finite_check_and_unscale_([grads], found, inv)

    return Case(
        "NonFiniteCheckAndUnscale",
        f"NonFiniteCheckAndUnscale {n} {dtype}",
        dtype,
        inputs,
        {},
        torch=torch_call,
        standard=lambda: _standard(inputs),
    )
