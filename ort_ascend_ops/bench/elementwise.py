"""The shared shape of a memory-bound op's benchmark: native kernel, inlined reference, and a
same-run copy of the bytes the op must move."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import Fail

from ..reference.model import make_op_model
from ..runtime import ortvalue_copy, session_options
from .timing import CopyBaseline, Timing, measure


@dataclass
class Result:
    label: str
    threads: int
    native: Timing
    reference: Timing | None
    copy: Timing
    nbytes: int

    @property
    def bandwidth(self) -> float:
        return self.nbytes / self.native.median / 1e9

    @property
    def copy_fraction(self) -> float:
        return self.copy.median / self.native.median

    @property
    def speedup(self) -> float | None:
        return None if self.reference is None else self.reference.median / self.native.median

    def row(self) -> str:
        ref = (
            f"{self.reference}  {self.speedup:6.1f}x" if self.reference else f"{'(cannot run)':>17}  {'':>7}"
        )
        return (
            f"{self.label:<44} {self.threads:>2}  {self.native}  {ref}  "
            f"{self.bandwidth:6.1f} GB/s  {self.copy_fraction * 100:4.0f}% of copy"
        )

    def as_dict(self) -> dict:
        return {
            "case": self.label,
            "threads": self.threads,
            "native_s": self.native.median,
            "native_spread": self.native.spread,
            "reference_s": self.reference.median if self.reference else None,
            "speedup_vs_reference": self.speedup,
            "bytes": self.nbytes,
            "bandwidth_gbs": self.bandwidth,
            "copy_s": self.copy.median,
            "copy_fraction": self.copy_fraction,
        }


DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}


def row_cases(quick: bool) -> list[tuple[int, int, str]]:
    """(rows, cols, dtype) for the normalization family: LLM activations of 4096 and 8192 features."""
    shapes = [(512, 1024)] if quick else [(8192, 4096), (2048, 8192)]
    return [(rows, cols, dtype) for rows, cols in shapes for dtype in DTYPES]


HEADER = (
    f"{'case':<44} {'th':>2}  {'native':>17}  {'inlined reference':>17}  {'speedup':>7}  "
    f"{'achieved':>11}  roofline"
)


def _bound_run(model: onnx.ModelProto, inputs: dict[str, np.ndarray], threads: int, native: bool):
    """A zero-argument callable running ``model`` once, inputs and outputs bound in advance so
    that only the graph is timed. Inputs live in ORT-allocated memory, as they would inside a
    graph."""
    options = session_options(threads=threads, native=native)
    # ORT's idle workers spin after each run; they would steal the cores the copy baseline,
    # timed in turns with the kernel, runs on.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    binding = session.io_binding()
    values = {name: ortvalue_copy(a) for name, a in inputs.items()}
    for name, value in values.items():
        binding.bind_ortvalue_input(name, value)
    for output in session.get_outputs():
        binding.bind_output(output.name, "cpu")
    session.run_with_iobinding(binding)  # allocates the outputs once; later runs reuse them

    def run() -> None:
        session.run_with_iobinding(binding)

    run.keep_alive = (values, session)  # the binding only borrows the OrtValues
    return run


def _moved_bytes(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> int:
    """Bytes an op must read and write at the least: every input and output once."""
    written = 0
    for output in model.graph.output:
        tensor = output.type.tensor_type
        count = np.prod([d.dim_value for d in tensor.shape.dim], dtype=np.int64)
        written += int(count) * onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).itemsize
    return sum(a.nbytes for a in inputs.values()) + written


def bench_memory_bound(
    op_name: str,
    label: str,
    inputs: dict[str, np.ndarray],
    threads: int,
    repeats: int,
    attrs: dict | None = None,
    with_reference: bool = True,
) -> Result:
    """Times ``op_name`` on ``inputs`` natively, as the inlined reference, and a plain copy of
    the bytes the op must move, all on ``threads`` threads."""
    model = make_op_model(op_name, {name: (a.dtype, a.shape) for name, a in inputs.items()}, attrs or {})
    nbytes = _moved_bytes(model, inputs)
    copy = CopyBaseline(nbytes, threads)
    try:
        native, copy_time = measure(_bound_run(model, inputs, threads, native=True), copy, repeats=repeats)
    finally:
        copy.close()
    reference = None
    if with_reference:
        try:
            run_reference = _bound_run(model, inputs, threads, native=False)
        except Fail:  # the reference cannot run there (RoPE grad, bfloat16 with x: see its schema)
            run_reference = None
        if run_reference is not None:
            (reference,) = measure(run_reference, repeats=max(3, repeats // 4))
    return Result(label, threads, native, reference, copy_time, nbytes)
