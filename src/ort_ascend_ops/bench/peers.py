"""The peers a user would otherwise pick, each optional: PyTorch on the CPU (eager; autograd for the
grad ops) and ONNX Runtime's own standard kernels (opset 23) for the forward ops."""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper

# How to install what a run can go without (README, "Real models": the default Linux wheel of
# PyTorch pulls CUDA).
TORCH_INSTALL = (
    "pip install torch==2.13.0 (PyTorch's CPU wheel on this project's machines; elsewhere add "
    "--extra-index-url https://download.pytorch.org/whl/cpu)"
)
TRANSFORMERS_INSTALL = "pip install 'ort_ascend_ops[torch]'"
BENCH_INSTALL = "pip install 'ort_ascend_ops[bench]'"  # matplotlib and threadpoolctl
STANDARD_OPSET = 23


def absent(name: str, install: str, skipped: str, why: str = "not installed") -> str:
    """The one line a run prints for a peer or package it goes without: which, why, what the run
    leaves out, and how to get it."""
    return f"{name} absent ({why}): {skipped}; install: {install}"


@functools.cache
def importable(name: str) -> bool:
    """Whether the module ``name`` imports (it is imported, once)."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


@functools.cache
def torch_module():
    """PyTorch, or None when it is not installed."""
    # Like ONNX Runtime's (see runner), torch's OpenMP workers must not spin after each run: they
    # would steal the cores from whatever is timed next in the same turn.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if not importable("torch"):
        return None
    import torch

    return torch


def tensors(*arrays: np.ndarray, requires_grad: bool = False) -> list:
    """Torch tensors holding ``arrays``' values in their dtypes (bfloat16 included; indices as
    int64, which torch's indexing wants)."""
    torch = torch_module()
    out = []
    for a in arrays:
        if a.dtype.kind in "iu":
            out.append(torch.from_numpy(a.astype(np.int64)))
            continue
        t = torch.from_numpy(a.astype(np.float32)).to(getattr(torch, a.dtype.name))
        out.append(t.requires_grad_(requires_grad))
    return out


def forward(fn: Callable, *args) -> Callable[[], object]:
    """A call of ``fn(*args)`` without autograd."""
    torch = torch_module()

    def run() -> object:
        with torch.no_grad():
            return fn(*args)

    return run


def backward(y, wrt: list, dy) -> Callable[[], object]:
    """The backward pass alone of a graph built once: the gradients of ``y`` (seeded with ``dy``)
    with respect to ``wrt``."""
    torch = torch_module()

    def run() -> object:
        return torch.autograd.grad(y, wrt, dy, retain_graph=True)

    return run


def standard_model(op_type: str, inputs: dict[str, np.ndarray], **attrs) -> onnx.ModelProto:
    """A model holding one standard ONNX node ``op_type`` (opset 23) on ``inputs``, with one output
    ``y`` typed like the first input."""
    first = next(iter(inputs.values()))
    node = helper.make_node(op_type, list(inputs), ["y"], **attrs)
    return standard_graph([node], inputs, {"y": (first.dtype, None)}, op_type)


def standard_graph(
    nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray], outputs: dict[str, tuple], name: str
) -> onnx.ModelProto:
    """A model of standard ONNX ``nodes`` (opset 23) on ``inputs``, giving ``outputs`` (name ->
    (NumPy dtype, shape or None))."""

    def info(name: str, dtype: np.dtype, shape) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)

    graph = helper.make_graph(
        nodes,
        name,
        [info(name, a.dtype, a.shape) for name, a in inputs.items()],
        [info(name, dtype, shape) for name, (dtype, shape) in outputs.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", STANDARD_OPSET)], ir_version=10)
