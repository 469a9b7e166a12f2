"""Differential fuzzing of every op (strategies in fuzz_cases.py): valid calls match the float64
oracle on the native kernels and on the inlined reference functions in ONNX Runtime; invalid calls
are ONNX Runtime errors that name the op. CI runs a fixed-seed corpus (hypothesis profile "ci",
the default); `pytest tests/test_fuzz.py --hypothesis-profile=nightly` draws thousands per op."""

import numpy as np
import pytest
from fuzz_cases import INVALID, VALID
from hypothesis import assume, given
from onnx import helper

from engines import run
from harness import run_raw
from oracles import BF16
from ort_ascend_ops import make_op_model, make_session

OPS = list(VALID)


def native_model(case):
    types = {name: (a.dtype, [None] * a.ndim) for name, a in case.inputs.items()}
    return make_op_model(case.op, types, case.attrs, outputs=case.outputs)


def run_native(case):
    return make_session(native_model(case), threads=case.threads).run(case.inputs)


def is_ort_error(error):
    return type(error).__module__.startswith("onnxruntime")


@pytest.mark.parametrize("op", OPS)
def test_valid_calls_match_the_oracle_natively(op):
    @given(case=VALID[op])
    def native(case):
        case.check(run_native(case))

    native()


@pytest.mark.parametrize("op", OPS)
def test_valid_calls_match_the_oracle_on_the_reference_functions(op):
    @given(case=VALID[op])
    def reference(case):
        # ORT cannot inline the RoPE grad function for bfloat16 with x (OptionalHasElement takes no
        # bfloat16 before opset 28): test_reference_rotary_position_embedding.py pins that down.
        assume(
            not (
                case.op == "RotaryPositionEmbeddingGrad"
                and "x" in case.inputs
                and case.inputs["x"].dtype == BF16
            )
        )
        # Nor the indexer functions with int32 actual_seq_lengths (the limit their schemas state).
        assume(all(a.dtype != np.int32 for n, a in case.inputs.items() if n.startswith("actual_seq_lengths")))
        outputs = run("ort", case.op, case.inputs, case.attrs, outputs=case.outputs)
        # The reference model casts every output to float32 for NumPy; compare in the op's types.
        types = [
            helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type)
            for o in native_model(case).graph.output
        ]
        case.check([np.asarray(o).astype(t) for o, t in zip(outputs, types, strict=True)])

    reference()


@pytest.mark.parametrize("op", OPS)
def test_invalid_calls_are_ort_errors_naming_the_op(op):
    @given(case=INVALID[op])
    def invalid(case):
        with pytest.raises(Exception) as error:
            run_raw(case.op, case.inputs, case.outputs, case.attrs)
        message = str(error.value)
        assert is_ort_error(error.value), f"{type(error.value)}: {message}"
        assert case.op in message, message
        if case.names is not None:
            assert case.names in message, message

    invalid()
