"""What the tests of ONNX's standard ops on the NPU share (native/aclnn/standard, one row per op).
A Case is one node of a standard op: its inputs, made from a fresh random stream for each element
type it runs in, its attributes, and a float64 NumPy oracle written from ONNX's definition of the
op. ``check`` moves the node to ACLNN_DOMAIN as a session for the NPU does (``cann_ep``), runs it
through the aclnn backend on the emulated CANN runtime (through the CANN execution provider with
no CPU fallback under onnxruntime-cann, else the CPU test build), and holds its outputs to the
oracle within the element type's tolerance, and the emulator's counts to the aclnn function the
row names."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from ort_ascend_ops import aclnn_emulator
from ort_ascend_ops.cann_ep.aclnn_ops import to_aclnn_domain
from ort_ascend_ops.domain import ACLNN_DOMAIN

F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)
I8, U8 = np.dtype(np.int8), np.dtype(np.uint8)
FLOATS = (F32, F16, BF16)
NUMBERS = (*FLOATS, I32, I64)
ALL = (*NUMBERS, BOOL, U8, I8)
# Relative and absolute: a few ulps of the type, over values of about 1; exact for the rest.
TOLERANCE = {F32: 1e-5, F16: 2e-3, BF16: 1.6e-2}
OPSET = 21


@dataclasses.dataclass(frozen=True)
class Case:
    """``make(rng, dtype)`` gives the node's inputs (None: an empty slot), ``oracle(*inputs)``
    its outputs in float64 (or the exact integers and bools); ``constants`` are the indices of
    inputs that are initializers, as a graph whose shapes were folded has them (shapes, axes);
    ``aclnn`` the functions that must run (their first phases counted)."""

    op: str
    make: Callable[[np.random.Generator, np.dtype], Sequence[np.ndarray | None]]
    oracle: Callable[..., Sequence[np.ndarray] | np.ndarray]
    aclnn: Sequence[str]
    attrs: dict = dataclasses.field(default_factory=dict)
    dtypes: Sequence[np.dtype] = FLOATS
    constants: Sequence[int] = ()
    outputs: int = 1
    id: str = ""
    tolerance: float | None = None  # beyond the type's (a sum over many elements, say)


def params(cases: Sequence[Case]) -> list:
    """pytest params: each case in each of its types, the id holding "aclnn" (.ci/cann-ep)."""
    return [
        pytest.param(case, dtype, id=f"aclnn-{case.op}-{case.id or 'case'}-{np.dtype(dtype).name}")
        for case in cases
        for dtype in case.dtypes
    ]


def _tensor_type(array: np.ndarray) -> int:
    if array.dtype == BF16:
        return onnx.TensorProto.BFLOAT16
    return helper.np_dtype_to_tensor_dtype(array.dtype)


def _initializer(name: str, array: np.ndarray) -> onnx.TensorProto:
    if array.dtype == BF16:
        tensor = numpy_helper.from_array(array.view(np.uint16), name)
        tensor.data_type = onnx.TensorProto.BFLOAT16
        return tensor
    return numpy_helper.from_array(array, name)


def node_model(case: Case, inputs: Sequence[np.ndarray | None]) -> tuple[onnx.ModelProto, dict]:
    """A model of the case's one standard node, and the feeds of its non-constant inputs."""
    names = [f"x{k}" if a is not None else "" for k, a in enumerate(inputs)]
    outputs = [f"y{k}" for k in range(case.outputs)]
    node = helper.make_node(case.op, names, outputs, **case.attrs)
    feeds = {
        n: a for k, (n, a) in enumerate(zip(names, inputs, strict=True)) if n and k not in case.constants
    }
    initializers = [_initializer(names[k], inputs[k]) for k in case.constants if inputs[k] is not None]
    graph = helper.make_graph(
        [node],
        "standard_op",
        [helper.make_tensor_value_info(n, _tensor_type(a), a.shape) for n, a in feeds.items()],
        [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in outputs],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)
    inferred = onnx.shape_inference.infer_shapes(model)
    del model.graph.output[:]
    model.graph.output.extend(inferred.graph.output)
    for output in model.graph.output:  # what ONNX cannot infer (inputs it refuses) types as input 0
        if not output.type.tensor_type.elem_type:
            output.type.tensor_type.elem_type = _tensor_type(next(a for a in inputs if a is not None))
    return model, feeds


def run(case: Case, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    model, feeds = node_model(case, inputs)
    moved = to_aclnn_domain(model)
    assert [n.domain for n in moved.graph.node] == [ACLNN_DOMAIN], f"{case.op} is not in STANDARD_OPS"
    return aclnn_emulator.make_session(moved).run(feeds)


def check(case: Case, dtype: np.dtype, rng: np.random.Generator, emulator) -> None:
    """The case's node on the NPU gives the oracle's outputs, through the row's aclnn functions."""
    inputs = case.make(rng, np.dtype(dtype))
    got = run(case, inputs)
    wanted = case.oracle(*inputs)
    wanted = [wanted] if isinstance(wanted, np.ndarray) else list(wanted)
    assert len(got) == len(wanted)
    for k, (out, ref) in enumerate(zip(got, wanted, strict=True)):
        ref = np.asarray(ref)
        assert out.shape == ref.shape, (k, out.shape, ref.shape)
        if out.dtype in FLOATS:
            tol = max(TOLERANCE[out.dtype], case.tolerance or 0.0)
            np.testing.assert_allclose(out.astype(np.float64), ref, rtol=tol, atol=tol, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(out, ref.astype(out.dtype), err_msg=f"output {k}")
    for function in case.aclnn:
        assert emulator.aclemu_calls(f"{function}GetWorkspaceSize".encode()) > 0, function


def refused(case: Case, inputs: Sequence[np.ndarray | None], match: str) -> None:
    """The node is refused with an error naming the op and ``match``."""
    with pytest.raises(Exception, match=match) as raised:
        run(case, inputs)
    assert case.op in str(raised.value)


def floats(rng: np.random.Generator, shape, dtype: np.dtype, low=-2.0, high=2.0) -> np.ndarray:
    """Values of ``dtype`` (exactly representable in it, so that the oracle sees what the kernel
    reads) uniform in [low, high)."""
    return rng.uniform(low, high, shape).astype(dtype)


def values(rng: np.random.Generator, shape, dtype: np.dtype, low: int = -9, high: int = 10) -> np.ndarray:
    """Data of any ``dtype``, exact in it: floats as ``floats`` gives them, integers in [low,
    high) (from 0 when unsigned), bools at random."""
    if dtype in FLOATS:
        return floats(rng, shape, dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    return rng.integers(0 if dtype == U8 else low, high, shape).astype(dtype)


def wide(*arrays: np.ndarray) -> list[np.ndarray]:
    """The arrays in float64 (ints and bools as they are), for oracles."""
    return [a.astype(np.float64) if a.dtype in FLOATS else a for a in arrays]
