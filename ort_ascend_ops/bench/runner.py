"""What every benchmark does: the native kernel, the inlined reference, and the machine's roof for
the kind of work (a copy of the same bytes, or NumPy's sgemm rate), measured in the same run."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import Fail

from ..reference.model import make_op_model
from ..runtime import ortvalue_copy, session_options
from .timing import CopyBaseline, SgemmBaseline, Timing, measure


@dataclass
class Result:
    label: str
    threads: int
    native: Timing
    reference: Timing | None
    work: float  # bytes moved or floating-point operations, per run
    unit: str  # "GB/s" or "GFLOP/s"
    roof_rate: float  # the same unit, measured in the same run
    roof_name: str  # "copy" or "sgemm"

    @property
    def achieved(self) -> float:
        return self.work / self.native.median / 1e9

    @property
    def roof_fraction(self) -> float:
        return self.achieved / self.roof_rate

    @property
    def speedup(self) -> float | None:
        return None if self.reference is None else self.reference.median / self.native.median

    def row(self) -> str:
        ref = (
            f"{self.reference}  {self.speedup:6.1f}x" if self.reference else f"{'(cannot run)':>17}  {'':>7}"
        )
        return (
            f"{self.label:<44} {self.threads:>2}  {self.native}  {ref}  "
            f"{self.achieved:6.1f} {self.unit:<7}  {self.roof_fraction * 100:4.0f}% of {self.roof_name}"
        )

    def as_dict(self) -> dict:
        return {
            "case": self.label,
            "threads": self.threads,
            "native_s": self.native.median,
            "native_spread": self.native.spread,
            "reference_s": self.reference.median if self.reference else None,
            "speedup_vs_reference": self.speedup,
            "work": self.work,
            "unit": self.unit,
            "achieved": self.achieved,
            "roof": self.roof_name,
            "roof_rate": self.roof_rate,
            "roof_fraction": self.roof_fraction,
        }


DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}


def row_cases(quick: bool) -> list[tuple[int, int, str]]:
    """(rows, cols, dtype) for the normalization family: LLM activations of 4096 and 8192 features."""
    shapes = [(512, 1024)] if quick else [(8192, 4096), (2048, 8192)]
    return [(rows, cols, dtype) for rows, cols in shapes for dtype in DTYPES]


HEADER = (
    f"{'case':<44} {'th':>2}  {'native':>17}  {'inlined reference':>17}  {'speedup':>7}  "
    f"{'achieved':>14}  roofline"
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
    reference = _time_reference(model, inputs, threads, repeats) if with_reference else None
    return Result(label, threads, native, reference, nbytes, "GB/s", nbytes / copy_time.median / 1e9, "copy")


def _time_reference(model: onnx.ModelProto, inputs: dict[str, np.ndarray], threads: int, repeats: int):
    try:
        run_reference = _bound_run(model, inputs, threads, native=False)
    except Fail:  # the reference cannot run there (RoPE grad, bfloat16 with x: see its schema)
        return None
    (reference,) = measure(run_reference, repeats=max(3, repeats // 4))
    return reference


def bench_compute_bound(
    op_name: str,
    label: str,
    inputs: dict[str, np.ndarray],
    flops: float,
    threads: int,
    repeats: int,
    attrs: dict | None = None,
) -> Result:
    """Times ``op_name`` natively and as the inlined reference, against NumPy's sgemm rate on the
    same threads."""
    model = make_op_model(op_name, {name: (a.dtype, a.shape) for name, a in inputs.items()}, attrs or {})
    sgemm = SgemmBaseline(threads)
    try:
        native, sgemm_time = measure(_bound_run(model, inputs, threads, native=True), sgemm, repeats=repeats)
    finally:
        sgemm.close()
    reference = _time_reference(model, inputs, threads, repeats)
    return Result(
        label, threads, native, reference, flops, "GFLOP/s", sgemm.flops / sgemm_time.median / 1e9, "sgemm"
    )
