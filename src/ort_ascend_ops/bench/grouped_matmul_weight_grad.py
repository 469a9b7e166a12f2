"""GroupedMatmulWeightGrad at GroupedMatmul's geometries (see there): per expert, its rows of x
and of dy multiplied and summed over its tokens. GEMM-shaped (roof: sgemm)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from . import peers
from .grouped_matmul import cases, float32_nodes, float32_output, flops, group_counts, label, offsets
from .runner import Case, random

__all__ = ["PEERS", "cases", "make"]

PEERS = (
    "PyTorch: the backward alone (graph built once) of `torch._grouped_mm(x, weight, "
    "offs=cumsum(group_list).int32)` with respect to weight (x needs no gradient); ORT: the "
    "gradient of the per-expert loop the export wrote before this op: x and dy Split by the "
    "counts, per expert `MatMul(Transpose(x_e), dy_e)` (`MatMul(Transpose(dy_e), x_e)` with "
    "transpose_weight), Unsqueeze, Concat; bfloat16 cast to float32 around it."
)


def _standard(
    inputs: dict[str, np.ndarray], transpose: int, experts: int
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    x, dy = inputs["x"], inputs["dy"]
    nodes, (xf, dyf) = float32_nodes(["x", "dy"], x.dtype)
    xs = [f"x{e}" for e in range(experts)]
    dys = [f"dy{e}" for e in range(experts)]
    nodes += [
        helper.make_node("Split", [xf, "group_list"], xs, axis=0),
        helper.make_node("Split", [dyf, "group_list"], dys, axis=0),
        helper.make_node("Constant", [], ["axis0"], value_ints=[0]),
    ]
    for e in range(experts):
        left, right = (dys[e], xs[e]) if transpose else (xs[e], dys[e])
        nodes += [
            helper.make_node("Transpose", [left], [f"{left}_t"], perm=[1, 0]),
            helper.make_node("MatMul", [f"{left}_t", right], [f"g{e}"]),
            helper.make_node("Unsqueeze", [f"g{e}", "axis0"], [f"g{e}_3d"]),
        ]
    dwf, cast = float32_output("dweight", x.dtype)
    nodes += [helper.make_node("Concat", [f"g{e}_3d" for e in range(experts)], [dwf], axis=0), *cast]
    k, n = x.shape[1], dy.shape[1]
    shape = (experts, n, k) if transpose else (experts, k, n)
    model = peers.standard_graph(nodes, inputs, {"dweight": (x.dtype, shape)}, "grouped_matmul_weight_grad")
    return model, inputs


def make(case: tuple[int, int, int, int, int, str]) -> Case:
    experts, rows, k, n, transpose, dtype = case
    rng = np.random.default_rng(0)
    inputs = {
        "x": random((rows, k), dtype, rng),
        "dy": random((rows, n), dtype, rng),
        "group_list": group_counts(experts, rows),
    }

    def torch_call():
        torch = peers.torch_module()
        (x,) = peers.tensors(inputs["x"])
        (dy,) = peers.tensors(inputs["dy"])
        weight = torch.zeros((experts, n, k) if transpose else (experts, k, n), dtype=x.dtype)
        weight.requires_grad_(True)
        used = weight.transpose(-2, -1) if transpose else weight
        y = torch._grouped_mm(x, used, offsets(inputs["group_list"]))
        return peers.backward(y, [weight], dy)

    return Case(
        "GroupedMatmulWeightGrad",
        label("GroupedMatmulWGrad", case),
        dtype,
        inputs,
        {"transpose_weight": transpose},
        flops=flops(case),
        torch=torch_call,
        standard=lambda: _standard(inputs, transpose, experts),
    )
