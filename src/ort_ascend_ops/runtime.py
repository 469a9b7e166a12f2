"""Running models that use the ops: sessions with the native library registered, and NumPy in
and out for every dtype, bfloat16 included (ONNX Runtime's Python API has no NumPy bfloat16)."""

from __future__ import annotations

import ctypes
import itertools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidGraph

from .bfloat16 import widen_bfloat16, widen_float16_products
from .cann_ep import for_cann_ep
from .cann_ep.aclnn_ops import to_aclnn_domain
from .domain import DOMAIN
from .opschema import bind_types, elem_type, load_op_specs

_LIBRARY_NAME = "libort_ascend_ops.so"
# Marks options that hold a library of our domain (this one, or the aclnn emulator's build):
# ONNX Runtime cannot say, and a second one fails the session ("Domain already set in registry").
LIBRARY_KEY = "ort_ascend_ops.library"
CANN_EP = "CANNExecutionProvider"


def get_library_path() -> str:
    """Path of the native custom-op library (``ORT_ASCEND_OPS_LIBRARY`` overrides it)."""
    override = os.environ.get("ORT_ASCEND_OPS_LIBRARY")
    path = Path(override) if override else Path(__file__).with_name(_LIBRARY_NAME)
    if not path.is_file():
        raise FileNotFoundError(
            f"native library {path} not found; install the package with `pip install .` "
            "(which builds it) or point ORT_ASCEND_OPS_LIBRARY at a build of native/"
        )
    return str(path)


def _c_contiguous(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    # Not np.ascontiguousarray, which would also turn a 0-d array into 1-d.
    return array if array.flags.c_contiguous else array.copy()


def ortvalue_view(array: np.ndarray) -> ort.OrtValue:
    """An OrtValue over ``array``'s own memory (no copy when it is C-contiguous), for any
    supported dtype, ``ml_dtypes.bfloat16`` included."""
    array = _c_contiguous(array)
    if array.dtype == ml_dtypes.bfloat16:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            array.view(np.uint16), onnx.TensorProto.BFLOAT16
        )
    return ort.OrtValue.ortvalue_from_numpy(array)


def ortvalue_copy(array: np.ndarray) -> ort.OrtValue:
    """A copy of ``array`` in memory ONNX Runtime allocated itself (64-byte aligned, like every
    tensor inside a graph), where ``ortvalue_view`` wraps NumPy's memory, often only 16-byte
    aligned."""
    array = _c_contiguous(array)
    bfloat16 = array.dtype == ml_dtypes.bfloat16
    elem = onnx.TensorProto.BFLOAT16 if bfloat16 else onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), elem)
    value.update_inplace(array.view(np.uint16) if bfloat16 else array)
    return value


def _as_numpy(value: ort.OrtValue) -> np.ndarray:
    if value.data_type() != "tensor(bfloat16)":
        return value.numpy()
    shape = value.shape()
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count, dtype=np.uint16)
    if count:
        ctypes.memmove(raw.ctypes.data, value.data_ptr(), raw.nbytes)
    return raw.view(ml_dtypes.bfloat16).reshape(shape)


def ortvalue_memory(value: ort.OrtValue) -> np.ndarray:
    """NumPy over the value's own memory, bfloat16 included (where ``_as_numpy`` copies), for
    code that writes it in place; valid while the value lives."""
    if value.data_type() != "tensor(bfloat16)":
        return value.numpy()  # shares the buffer of a CPU tensor
    shape = value.shape()
    count = int(np.prod(shape, dtype=np.int64))
    if not count:
        return np.empty(shape, ml_dtypes.bfloat16)
    raw = (ctypes.c_uint16 * count).from_address(value.data_ptr())
    return np.ctypeslib.as_array(raw).view(ml_dtypes.bfloat16).reshape(shape)


def ortvalue_type(value: ort.OrtValue) -> onnx.TypeProto:
    """The value's ONNX tensor type (element type and shape), read without its data."""
    return onnx.helper.make_tensor_type_proto(elem_type(value.data_type()), value.shape())


class Session:
    """An ``onnxruntime.InferenceSession`` whose ``run`` takes and returns NumPy arrays of any
    supported dtype (``ml_dtypes.bfloat16`` included)."""

    def __init__(self, session: ort.InferenceSession):
        self.ort = session
        self.input_names = [i.name for i in session.get_inputs()]
        self.output_names = [o.name for o in session.get_outputs()]

    def run(self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str] | None = None) -> list[np.ndarray]:
        """Runs the model; errors are ONNX Runtime's own exceptions (``InvalidArgument``, ...)."""
        feeds = {name: ortvalue_view(array) for name, array in inputs.items()}
        names = list(outputs) if outputs is not None else self.output_names
        return [_as_numpy(value) for value in self.ort.run_with_ort_values(names, feeds)]


def session_options(*, threads: int | None = None, native: bool = True) -> ort.SessionOptions:
    """Session options with the native library registered (``native=False``: the inlined
    reference functions run instead) and, if given, a fixed intra-op thread count."""
    return _configured(ort.SessionOptions(), threads, native)


# ONNX Runtime's fusions that change a result's rounding and apply only where a value has no
# other reader (MatMulScaleFusion folds a scale into a GEMM, FastGeluFusion replaces the tanh
# approximation's ops by its kernel): a backward or a recomputed layer reading the value would
# change the forward's numbers (tests/test_architectures.py, recompute bit for bit). The session
# option "optimization.disable_specified_optimizers" does not reach them from Python; the
# session's disabled_optimizers does.
CONSUMER_DEPENDENT_FUSIONS = ("MatMulScaleFusion", "FastGeluFusion")


def _configured(options: ort.SessionOptions, threads: int | None, native: bool) -> ort.SessionOptions:
    if native:
        with_library(options)
    if threads is not None:
        options.intra_op_num_threads = threads
    return options


def with_library(options: ort.SessionOptions) -> ort.SessionOptions:
    """``options`` with the native library registered, once: options of ``session_options`` and
    of earlier calls already hold it; options where it was registered by hand must not come here
    (pass ``native=False`` with them)."""
    try:
        options.get_session_config_entry(LIBRARY_KEY)
    except RuntimeError:  # not there: not registered by us
        options.register_custom_ops_library(get_library_path())
        options.add_session_config_entry(LIBRARY_KEY, "1")
    return options


def _nodes(nodes: Sequence[onnx.NodeProto]):
    """The nodes and, depth first, those of their subgraphs (If, Loop, Scan bodies)."""
    for node in nodes:
        yield node
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else attr.graphs:
                yield from _nodes(sub.node)


def _value_types(model: onnx.ModelProto, names: set[str]) -> dict[str, int]:
    """The element types of the values ``names`` (shape inference runs only for those that are
    neither graph inputs nor initializers)."""
    graph = model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in graph.input}
    types |= {t.name: t.data_type for t in graph.initializer}
    if names - types.keys():
        inferred = onnx.shape_inference.infer_shapes(model)
        types |= {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
    return {name: types[name] for name in names if types.get(name)}


def check_nodes(model: onnx.ModelProto) -> None:
    """Raises ONNX Runtime's ``InvalidGraph`` for a node of ours with an attribute its op does not
    have (a misspelt ``epsilon``, say: ORT's C API gives custom kernels no way to list a node's
    attributes, so the library alone would ignore it), or with input types the op's schema refuses
    (ORT would only say that no kernel matches; this names the input and the rule)."""
    specs = load_op_specs()
    ours = [
        node
        for node in itertools.chain(_nodes(model.graph.node), *(_nodes(f.node) for f in model.functions))
        if node.domain == DOMAIN and node.op_type in specs
    ]
    for node in ours:
        known = {a.name for a in specs[node.op_type].attributes}
        for attr in node.attribute:
            if attr.name not in known:
                raise InvalidGraph(
                    f"{node.op_type} node '{node.name}': unknown attribute '{attr.name}'; "
                    f"{node.op_type} takes {', '.join(sorted(known)) or 'no attributes'}"
                )
    graph_nodes = {id(n) for n in _nodes(model.graph.node)}
    in_graph = [n for n in ours if id(n) in graph_nodes]
    types = _value_types(model, {name for n in in_graph for name in n.input if name})
    for node in in_graph:
        spec = specs[node.op_type]
        inputs = {p.name: types.get(name) for p, name in zip(spec.inputs, node.input, strict=False) if name}
        try:
            # The kernels name a (T, TG) pair outside the table themselves, as they run.
            bind_types(spec, inputs, combinations=False)
        except ValueError as error:
            raise InvalidGraph(f"{node.op_type} node '{node.name}': {error}") from None


def make_session(
    model: onnx.ModelProto | str | os.PathLike,
    *,
    threads: int | None = None,
    native: bool = True,
    providers: Sequence[str | tuple[str, dict[str, str]]] = ("CPUExecutionProvider",),
    options: ort.SessionOptions | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> Session:
    """A session for ``model`` with the native library registered unless ``native=False``. Nodes
    of our domain are checked for unknown attributes and refused input types first
    (``check_nodes``). The standard ops that ONNX Runtime's CPU has no bfloat16 kernel for
    (MatMul, Add, Softmax, ...) compute in float32 between casts, each result rounded to bfloat16
    as PyTorch does (``widen_bfloat16``; a model without bfloat16 goes to ONNX Runtime as it is).
    With the CANN EP among ``providers``, the standard ops go to the NPU's aclnn kernels in their
    own types first (``cann_ep.for_cann_ep``), and only what none of them takes is widened;
    without it float16 MatMuls compute in float32, whose result does not change with the thread
    count (``widen_float16_products``). ``input_shapes`` (the CANN EP's sessions only) specializes
    the model to them (``cann_ep.with_static_shapes``). Given ``options`` (to profile, say)
    get the library too unless ``native=False`` (``with_library``), and ``threads`` if given."""
    options = _configured(ort.SessionOptions() if options is None else options, threads, native)
    loaded = model if isinstance(model, onnx.ModelProto) else onnx.load(model, load_external_data=False)
    check_nodes(loaded)
    if any((p if isinstance(p, str) else p[0]) == CANN_EP for p in providers):
        # The NPU's kernels keep the low types; the casts the widening puts around what no row
        # takes go to the NPU too (the EP's own Cast has no bfloat16).
        runnable = to_aclnn_domain(widen_bfloat16(for_cann_ep(loaded, input_shapes)))
    else:
        runnable = widen_float16_products(widen_bfloat16(loaded))
    if runnable is loaded:
        source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    else:
        source = runnable.SerializeToString()
        if not isinstance(model, onnx.ModelProto):
            # From bytes, ONNX Runtime finds the file's external data only when told where.
            folder = str(Path(model).resolve().parent)
            options.add_session_config_entry("session.model_external_initializers_file_folder_path", folder)
    try:
        session = ort.InferenceSession(
            source, options, providers=list(providers), disabled_optimizers=list(CONSUMER_DEPENDENT_FUSIONS)
        )
        return Session(session)
    except Exception as error:
        if "Domain already set in registry" not in str(error):
            raise
        raise ValueError(
            f"make_session: the session options register the '{DOMAIN}' library twice (once by hand, "
            "once here): pass such options with native=False, or make them with session_options()"
        ) from None


def ascend_providers(device_id: int = 0, **cann_options: object) -> list[str | tuple[str, dict[str, str]]]:
    """Execution providers for an Ascend NPU (``onnxruntime-cann``): CANN's, in single-op mode, then
    the CPU for nodes CANN does not take. CANN's graph mode (``enable_cann_graph=1``, its default)
    is refused: there the EP claims our nodes too, but compiles them with CANN's ONNX parser instead
    of running our kernels."""
    options = {"device_id": str(device_id), "enable_cann_graph": "0"}
    options.update({name: str(value) for name, value in cann_options.items()})
    if options["enable_cann_graph"] not in ("0", "False", "false"):
        raise ValueError(
            "enable_cann_graph must be 0: in CANN's graph mode the EP hands our nodes to CANN's ONNX parser "
            "instead of running their aclnn kernels"
        )
    options["enable_cann_graph"] = "0"
    return [(CANN_EP, options), "CPUExecutionProvider"]


def device_providers(device: str) -> list[str | tuple[str, dict[str, str]]]:
    """The execution providers of a training API ``device``: ``"cpu"``, or ``"npu"`` / ``"npu:N"``
    (``ascend_providers(N)``); an error naming the device when this ONNX Runtime cannot reach it."""
    if device == "cpu":
        return ["CPUExecutionProvider"]
    kind, _, index = device.partition(":")
    if kind != "npu" or (":" in device and not index.isdigit()):
        raise ValueError(f"device {device!r}: expected 'cpu', 'npu' or 'npu:N'")
    if CANN_EP not in ort.get_available_providers():
        raise RuntimeError(
            f"device {device!r}: this ONNX Runtime has no {CANN_EP} (onnxruntime-cann has it: "
            "the package's [cann] extra, in an environment without onnxruntime)"
        )
    return ascend_providers(int(index or 0))


def check_device(session: ort.InferenceSession, device: str) -> None:
    """Raises when ``device`` is an NPU and ONNX Runtime fell back to the CPU alone (it does so,
    with a warning, for a device ID past the last NPU or a driver that does not start)."""
    if device != "cpu" and CANN_EP not in session.get_providers():
        raise RuntimeError(
            f"device {device!r} is not there: the {CANN_EP} did not start and ONNX Runtime fell back "
            "to the CPU (its reason is logged above: a device ID past the last NPU, or no NPU driver)"
        )


def make_ascend_session(
    model: onnx.ModelProto | str | os.PathLike,
    *,
    device_id: int = 0,
    threads: int | None = None,
    **cann_options: object,
) -> Session:
    """A session that runs the ops on an Ascend NPU through aclnn (``ascend_providers``), the
    native library registered. Without the CANN execution provider ONNX Runtime warns and runs
    everything on the CPU."""
    return make_session(model, threads=threads, providers=ascend_providers(device_id, **cann_options))
