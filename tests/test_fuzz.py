"""Differential fuzzing of every op (its strategies ``valid`` and ``invalid`` in
tests/cases/<op>.py): valid calls match the float64 oracle on the native kernels and on the inlined
reference functions in ONNX Runtime; invalid calls are ONNX Runtime errors that name the op. CI runs a fixed-seed corpus (hypothesis profile "ci",
the default); `pytest tests/test_fuzz.py --hypothesis-profile=nightly` draws thousands per op."""

import numpy as np
import pytest
from hypothesis import given, settings
from onnx import helper

from cases import CASES
from engines import run
from harness import fed, raw_model
from ort_ascend_ops import make_op_model, make_session

OPS = list(CASES)


def reference_share():
    """The share of the corpus the reference functions replay: their sessions take several times
    longer to build than the library's (the contract's checks are hundreds of nodes)."""
    return settings(max_examples=max(1, settings().max_examples // 3))


def native_model(case):
    # Without the reference functions, which the kernels do not need (ORT would parse them).
    types = {name: (a.dtype, [None] * a.ndim) for name, a in fed(case.inputs).items()}
    return make_op_model(case.op, types, case.attrs, outputs=case.outputs, with_functions=False)


def is_ort_error(error):
    return type(error).__module__.startswith("onnxruntime")


@pytest.mark.parametrize("op", OPS)
def test_valid_calls_match_the_oracle_natively(op):
    @given(case=CASES[op].valid)
    def native(case):
        case.check(run("native", case.op, case.inputs, case.attrs, case.outputs, threads=case.threads))

    native()


@pytest.mark.parametrize("op", OPS)
def test_valid_calls_match_the_oracle_on_the_reference_functions(op):
    @reference_share()
    @given(case=CASES[op].valid)
    def reference(case):
        outputs = run("ort", case.op, case.inputs, case.attrs, outputs=case.outputs)
        # The reference model casts every output to float32 for NumPy; compare in the op's types.
        types = [
            helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type)
            for o in native_model(case).graph.output
        ]
        case.check([np.asarray(o).astype(t) for o, t in zip(outputs, types, strict=True)])

    reference()


@pytest.mark.parametrize("native", [True, False], ids=["native", "reference_functions"])
@pytest.mark.parametrize("op", OPS)
def test_invalid_calls_are_ort_errors_naming_the_op(op, native):
    @given(case=CASES[op].invalid)
    def invalid(case):
        with pytest.raises(Exception) as error:
            model = raw_model(case.op, case.inputs, case.outputs, case.attrs, with_functions=not native)
            make_session(model, native=native).run(fed(case.inputs))
        message = str(error.value)
        assert is_ort_error(error.value), f"{type(error.value)}: {message}"
        assert case.op in message, message
        if case.names is not None:
            assert case.names in message, message

    (invalid if native else reference_share()(invalid))()
