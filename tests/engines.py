"""The one way the tests run an op: ``run(engine, op, inputs, attrs)``. The library's kernels:
"native" (CPU) and "aclnn" (the aclnn backend against the host emulator, through the CANN
execution provider under onnxruntime-cann). The reference functions: "portable" (inlined by ONNX
Runtime in a session of make_session), "ort" (a plain ONNX Runtime session), "eager" (onnxscript
eager, each op on onnx.reference, which takes bfloat16 and runs the hundreds of small ops of the
contract's checks faster than ONNX Runtime's eager sessions) and "reference" (onnx.reference)."""

import onnxruntime as ort
import pytest
from onnx.reference import ReferenceEvaluator
from onnxscript import evaluator

from harness import fed, raw_model
from ort_ascend_ops import aclnn_emulator, make_op_model, make_session
from ort_ascend_ops.opschema import load_op_specs
from ort_ascend_ops.reference.registry import function_for
from ort_ascend_ops.runtime import ortvalue_view

ENGINES = ["eager", "ort", "reference"]  # the reference functions' engines the oracle tests use


def on(engine, *values, id=None):
    """A test case on engine, its id led by the engine's name. Those of the reference functions
    are marked reference_functions: no native code of ours runs there (.ci/sanitize leaves them
    out); the id of an aclnn case holds "aclnn" (.ci/cann-ep selects them)."""
    marks = [pytest.mark.reference_functions] if engine in ENGINES else []
    return pytest.param(engine, *values, id=engine if id is None else f"{engine}-{id}", marks=marks)


def run(engine, op_name, inputs, attrs=None, outputs=None, *, threads=None, raw=None):
    """The produced outputs of op_name as NumPy arrays, in the op's output order. ``outputs``
    picks them as make_op_model does (default: every output the given inputs allow). ``raw``
    (output name -> dtype) builds the node without the schema's checks, for inputs the schema
    would refuse (native, portable and aclnn). An input given as None is an empty slot."""
    attrs = attrs or {}
    assert raw is None or engine in ("native", "portable", "aclnn"), engine
    model = None if raw is None else raw_model(op_name, inputs, raw, attrs)
    inputs = fed(inputs)
    if model is None and engine in ("native", "portable"):
        # Dynamic dims: the kernel, not ONNX Runtime's shape inference, meets every shape. The
        # kernels need no reference functions (ORT would parse them for every session).
        dynamic = {name: (a.dtype, [None] * a.ndim) for name, a in inputs.items()}
        model = make_op_model(op_name, dynamic, attrs, outputs=outputs, with_functions=engine == "portable")
    types = {name: (a.dtype, a.shape) for name, a in inputs.items()}
    if engine == "native":
        return make_session(model, threads=threads).run(inputs)
    if engine == "portable":
        return make_session(model, threads=threads, native=False).run(inputs)
    if engine == "aclnn":
        if raw is None:
            model = make_op_model(op_name, types, attrs, outputs=outputs)
        return aclnn_emulator.make_session(model, threads=threads).run(inputs)
    if engine == "eager":
        model = make_op_model(op_name, types, attrs, with_functions=False, outputs=outputs)
        produced = {o.name for o in model.graph.output}
        # onnxscript's default eager evaluator feeds NumPy arrays to ONNX Runtime, which rejects
        # bfloat16; onnx.reference takes ml_dtypes.bfloat16 arrays.
        _, function = function_for(op_name, inputs)
        with evaluator.default_as(evaluator.OnnxReferenceRuntimeEvaluator()):
            results = function(**inputs, **attrs)
        # The function returns every output; keep those the node would produce.
        results = results if isinstance(results, tuple) else (results,)
        spec_outputs = [p.name for p in load_op_specs()[op_name].outputs]
        return [r for name, r in zip(spec_outputs, results, strict=True) if name in produced]
    if engine == "ort":
        # ONNX Runtime cannot return bfloat16 to NumPy: cast outputs to float32 in the graph.
        model = make_op_model(op_name, types, attrs, output_cast_float=True, outputs=outputs)
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {name: ortvalue_view(a) for name, a in inputs.items()})
    assert engine == "reference", engine
    # onnx.reference does not apply function attribute defaults: pass every attribute.
    defaults = {a.name: a.default for a in load_op_specs()[op_name].attributes}
    model = make_op_model(op_name, types, defaults | attrs, outputs=outputs)
    return ReferenceEvaluator(model).run(None, inputs)
