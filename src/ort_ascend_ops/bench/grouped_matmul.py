"""GroupedMatmul over a mixture-of-experts layer's expert products: M token-expert rows sorted by
expert, uneven counts (some experts get none), K x N weights per expert, 8 to 64 experts.
GEMM-shaped (roof: sgemm)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from . import peers
from .runner import Case, random

PEERS = (
    "PyTorch: `torch._grouped_mm(x, weight, offs=cumsum(group_list).int32)` under `no_grad` (the "
    "weight `.transpose(-2, -1)` with transpose_weight, as transformers' grouped_mm experts call "
    "it); ORT: the per-expert loop the export wrote for `_grouped_mm` before this op "
    "(export/experts.py): x Split by the counts, weight Split and Squeezed, one MatMul per expert, "
    "Concat; bfloat16 cast to float32 around it (ONNX Runtime's CPU MatMul has no bfloat16)."
)
# (experts, rows M, K, N): a cut-down Mixtral / DeepSeek-V2-Lite expert (hidden 1024, expert
# intermediate 1408) at 2048 token-expert rows, from Mixtral's 8 experts to DeepSeek's 64.
QUICK = [(8, 512, 256, 352)]
FULL = [(8, 2048, 1024, 1408), (32, 2048, 1024, 1408), (64, 2048, 1024, 1408)]
# The experts counts also run with transpose_weight (weight [E, N, K], as transformers' experts
# hold theirs).
TRANSPOSED = {8, 64}


def cases(quick: bool, dtypes: tuple[str, ...]) -> list[tuple[int, int, int, int, int, str]]:
    """(experts, M, K, N, transpose_weight, dtype)."""
    if quick:
        geometries = [(*g, 0) for g in QUICK]
    else:
        geometries = [(*g, 0) for g in FULL] + [(*g, 1) for g in FULL if g[0] in TRANSPOSED]
    return [(*geometry, dtype) for geometry in geometries for dtype in dtypes]


def group_counts(experts: int, rows: int) -> np.ndarray:
    """Uneven rows per expert adding up to ``rows``: a skewed router (squared uniform weights) with
    an eighth of the experts (at least one) given no token; the same in the forward's and the
    weight grad's cases."""
    rng = np.random.default_rng(experts)
    weights = rng.random(experts) ** 2
    weights[rng.choice(experts, max(1, experts // 8), replace=False)] = 0.0
    return rng.multinomial(rows, weights / weights.sum()).astype(np.int64)


def label(name: str, case: tuple) -> str:
    experts, rows, k, n, transpose, dtype = case
    return f"{name} E={experts} {rows}x{k}x{n}{' wT' if transpose else ''} {dtype}"


def flops(case: tuple) -> float:
    """The useful work: one [M, K] x [K, N] product, split among the experts."""
    _, rows, k, n, _, _ = case
    return 2.0 * rows * k * n


def offsets(group_list: np.ndarray):
    """``_grouped_mm``'s offs: each group's cumulative end, int32."""
    torch = peers.torch_module()
    return torch.from_numpy(np.cumsum(group_list).astype(np.int32))


def float32_nodes(names: list[str], dtype: np.dtype) -> tuple[list[onnx.NodeProto], list[str]]:
    """Casts of ``names`` to float32 where ``dtype`` is not (ORT's CPU MatMul is float32 only
    among T), and the names to compute on."""
    if dtype == np.float32:
        return [], names
    nodes = [helper.make_node("Cast", [name], [f"{name}_f"], to=TensorProto.FLOAT) for name in names]
    return nodes, [f"{name}_f" for name in names]


def float32_output(name: str, dtype: np.dtype) -> tuple[str, list[onnx.NodeProto]]:
    """What to compute the output ``name`` as, and the Cast back to ``dtype`` (none for float32)."""
    if dtype == np.float32:
        return name, []
    cast = helper.make_node("Cast", [f"{name}_f"], [name], to=helper.np_dtype_to_tensor_dtype(dtype))
    return f"{name}_f", [cast]


def _standard(inputs: dict[str, np.ndarray], transpose: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    x, weight = inputs["x"], inputs["weight"]
    experts = weight.shape[0]
    nodes, (xf, wf) = float32_nodes(["x", "weight"], x.dtype)
    rows = [f"x{e}" for e in range(experts)]
    weights = [f"w{e}" for e in range(experts)]
    nodes += [
        helper.make_node("Split", [xf, "group_list"], rows, axis=0),
        helper.make_node("Split", [wf], weights, axis=0, num_outputs=experts),
        helper.make_node("Constant", [], ["axis0"], value_ints=[0]),
    ]
    for e in range(experts):
        nodes.append(helper.make_node("Squeeze", [weights[e], "axis0"], [f"w{e}_2d"]))
        matrix = f"w{e}_2d"
        if transpose:  # [N, K] stored: torch.onnx writes the .T as a Transpose
            nodes.append(helper.make_node("Transpose", [matrix], [f"w{e}_kn"], perm=[1, 0]))
            matrix = f"w{e}_kn"
        nodes.append(helper.make_node("MatMul", [rows[e], matrix], [f"y{e}"]))
    yf, cast = float32_output("y", x.dtype)
    nodes += [helper.make_node("Concat", [f"y{e}" for e in range(experts)], [yf], axis=0), *cast]
    n = weight.shape[1] if transpose else weight.shape[2]
    return peers.standard_graph(nodes, inputs, {"y": (x.dtype, (x.shape[0], n))}, "grouped_matmul"), inputs


def make(case: tuple[int, int, int, int, int, str]) -> Case:
    experts, rows, k, n, transpose, dtype = case
    rng = np.random.default_rng(0)
    inputs = {
        "x": random((rows, k), dtype, rng),
        "weight": random((experts, n, k) if transpose else (experts, k, n), dtype, rng),
        "group_list": group_counts(experts, rows),
    }

    def torch_call():
        torch = peers.torch_module()
        x, weight = peers.tensors(inputs["x"], inputs["weight"])
        if transpose:
            weight = weight.transpose(-2, -1)
        return peers.forward(torch._grouped_mm, x, weight, offsets(inputs["group_list"]))

    return Case(
        "GroupedMatmul",
        label("GroupedMatmul", case),
        dtype,
        inputs,
        {"transpose_weight": transpose},
        flops=flops(case),
        torch=torch_call,
        standard=lambda: _standard(inputs, transpose),
    )
