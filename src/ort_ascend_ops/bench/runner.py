"""What every benchmark does: for one case, the native kernel, the inlined reference and the peers
(PyTorch, ONNX Runtime's standard op) on the same threads, held to the machine's roof for the kind
of work (a copy of the same bytes, or a GEMM rate: NumPy's sgemm, and PyTorch's bfloat16 GEMM for
bfloat16 rows) measured in the same run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort

from ..op_model import make_op_model
from ..runtime import ortvalue_copy, session_options
from . import peers
from .timing import CopyBaseline, GemmBaseline, Timing, measure

DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}

# What each row is compared with: key -> column title.
BASELINES = {"reference": "reference", "torch": "PyTorch", "ort": "ORT std op"}
# Seconds of timed turns (native, roof and peers taking turns) per case and thread count, and of
# the reference's runs; the repeats are cut to fit (at least 3), see ``timing.measure``.
TURNS_BUDGET_S = 2.0
REFERENCE_BUDGET_S = 1.0


def random(shape, dtype_name: str, rng: np.random.Generator) -> np.ndarray:
    """Uniform values in [-0.5, 0.5) (several times faster to draw than normal ones)."""
    return (rng.random(shape, np.float32) - 0.5).astype(DTYPES[dtype_name], copy=False)


@dataclass
class Case:
    """One benchmark case, as an op module builds it."""

    op: str  # the op in the ort_ascend_ops domain
    label: str  # the row's name: short op name, shape, dtype, mode
    dtype: str
    inputs: dict[str, np.ndarray]
    attrs: dict = field(default_factory=dict)
    flops: float | None = None  # GEMM-shaped work (roof: GemmBaseline); None: memory-bound (roof: copy)
    torch: Callable[[], Callable[[], object]] | None = None  # builds the timed PyTorch call
    standard: Callable[[], tuple[onnx.ModelProto, dict[str, np.ndarray]]] | None = None  # ORT's op


@dataclass
class Result:
    op: str
    label: str
    dtype: str
    threads: int
    native: Timing
    baselines: dict[str, Timing]  # the baselines that ran, by BASELINES key
    absent: dict[str, str]  # why the others have no time
    work: float  # bytes moved or floating-point operations, per run
    unit: str  # "GB/s" or "GFLOP/s"
    roof_rate: float  # the same unit, measured in the same run
    roof_name: str  # "copy", "sgemm" or "bf16 gemm"
    wall_s: float = 0.0  # what the row took, its setup included

    @property
    def achieved(self) -> float:
        return self.work / self.native.median / 1e9

    @property
    def roof_fraction(self) -> float:
        return self.achieved / self.roof_rate

    def speedup(self, baseline: str) -> float | None:
        timing = self.baselines.get(baseline)
        return None if timing is None else timing.median / self.native.median

    def as_dict(self) -> dict:
        row = {"op": self.op, "case": self.label, "dtype": self.dtype, "threads": self.threads}
        for name, timing in {"native": self.native, **self.baselines}.items():
            row.update(
                {
                    f"{name}_s": timing.median,
                    f"{name}_spread": timing.spread,
                    f"{name}_repeats": timing.repeats,
                }
            )
        for name in BASELINES:
            row[f"speedup_vs_{name}"] = self.speedup(name)
        return row | {
            "absent": self.absent,
            "work": self.work,
            "unit": self.unit,
            "achieved": self.achieved,
            "roof": self.roof_name,
            "roof_rate": self.roof_rate,
            "roof_fraction": self.roof_fraction,
            "wall_s": self.wall_s,
        }


def ort_values(inputs: dict[str, np.ndarray]) -> dict[str, ort.OrtValue]:
    """Copies of ``inputs`` in ORT-allocated memory, as they would live inside a graph."""
    return {name: ortvalue_copy(a) for name, a in inputs.items()}


def op_model(case: Case) -> onnx.ModelProto:
    """A graph of ``case``'s op alone, typed by its inputs."""
    return make_op_model(case.op, {name: (a.dtype, a.shape) for name, a in case.inputs.items()}, case.attrs)


@dataclass(frozen=True)
class _BoundRun:
    """One run of a session on bound inputs and outputs. It holds the inputs' OrtValues: the
    binding only borrows them."""

    session: ort.InferenceSession
    binding: ort.IOBinding
    values: dict[str, ort.OrtValue]

    def __call__(self) -> None:
        self.session.run_with_iobinding(self.binding)


def bound_run(
    model: onnx.ModelProto, values: dict[str, ort.OrtValue], threads: int, native: bool
) -> Callable[[], None]:
    """A zero-argument callable running ``model`` once, inputs and outputs bound in advance so
    that only the graph is timed."""
    options = session_options(threads=threads, native=native)
    # ORT's idle workers spin after each run; they would steal the cores the copy baseline,
    # timed in turns with the kernel, runs on.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # The memory pattern's first planned run of a many-node graph (the reference) page-faults one
    # block for all its intermediates: seconds at the large sizes, and later runs are no faster.
    options.enable_mem_pattern = False
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    binding = session.io_binding()
    for name, value in values.items():
        binding.bind_ortvalue_input(name, value)
    for output in session.get_outputs():
        binding.bind_output(output.name, "cpu")
    session.run_with_iobinding(binding)  # allocates the outputs once; later runs reuse them
    return _BoundRun(session, binding, values)


def _moved_bytes(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> int:
    """Bytes an op must read and write at the least: every input and output once."""
    written = 0
    for output in model.graph.output:
        tensor = output.type.tensor_type
        count = np.prod([d.dim_value for d in tensor.shape.dim], dtype=np.int64)
        written += int(count) * onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).itemsize
    return sum(a.nbytes for a in inputs.values()) + written


def _why(error: Exception) -> str:
    """Why a baseline cannot run: ONNX Runtime's message without its status prefix."""
    message = str(error).split(" : ")[-1].splitlines()[0][:200]
    return message if isinstance(error, ValueError) else f"ONNX Runtime refuses it: {message}"


class CaseRunner:
    """Runs one case on each thread count; what does not depend on it (the model, PyTorch's graph)
    is built once."""

    def __init__(self, case: Case):
        self.case = case
        self.model = op_model(case)
        self.values = ort_values(case.inputs)  # shared by the native and reference sessions
        self.absent: dict[str, str] = {}
        self.torch_call = None
        if peers.torch_module() is None:
            self.absent["torch"] = "not installed"
        elif case.torch is not None:
            self.torch_call = case.torch()
        if case.standard is None:
            self.absent["ort"] = "no standard op"

    def run(self, threads: int, max_repeats: int) -> Result:
        case, absent = self.case, dict(self.absent)
        fns: dict[str, Callable[[], object]] = {
            "native": bound_run(self.model, self.values, threads, native=True)
        }
        if self.torch_call is not None:
            peers.torch_module().set_num_threads(threads)
            fns["torch"] = self.torch_call
        if case.standard is not None:
            try:
                model, inputs = case.standard()
                fns["ort"] = bound_run(model, ort_values(inputs), threads, native=False)
            except Exception as e:  # noqa: BLE001 - ORT's errors derive from Exception only
                absent["ort"] = _why(e)
        work: float
        roof: CopyBaseline | GemmBaseline
        if case.flops is None:
            work, unit = _moved_bytes(self.model, case.inputs), "GB/s"
            roof = CopyBaseline(work, threads)
        else:
            work, unit = case.flops, "GFLOP/s"
            roof = GemmBaseline(threads, case.dtype)
        roofs = [call for call, _ in roof.candidates]
        try:
            timings = measure(*roofs, *fns.values(), repeats=max_repeats, budget_s=TURNS_BUDGET_S)
        finally:
            roof.close()
        roof_times, (native, *peer_times) = timings[: len(roofs)], timings[len(roofs) :]
        roof_rate = max(w / t.median for (_, w), t in zip(roof.candidates, roof_times, strict=True)) / 1e9
        baselines = dict(zip(list(fns)[1:], peer_times, strict=True))
        fns.clear()  # frees the sessions' outputs before the reference runs
        try:
            reference = bound_run(self.model, self.values, threads, native=False)
            (baselines["reference"],) = measure(reference, repeats=max_repeats, budget_s=REFERENCE_BUDGET_S)
        except Exception as e:  # noqa: BLE001 - e.g. RoPE grad in bfloat16 with x: see its schema
            absent["reference"] = _why(e)
        return Result(
            case.op,
            case.label,
            case.dtype,
            threads,
            native,
            {name: baselines[name] for name in BASELINES if name in baselines},
            absent,
            work,
            unit,
            roof_rate,
            "copy" if isinstance(roof, CopyBaseline) else roof.name,
        )
