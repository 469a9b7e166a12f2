"""The portable path (stock ONNX Runtime inlining the reference functions, no library) keeps the
contract: it serves every opset from 18 to the newest ONNX defines and every dtype and optional
input the native kernels run, and it refuses what they refuse, with an ONNX Runtime error that
names the op and the rule."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from cases import CASES
from harness import fed, raw_model
from oracles import (
    BF16,
    F16,
    F32,
    ROPE_LAYOUTS,
    TOL,
    assert_close,
    rms_norm_grad_oracle,
    rope_inputs,
)
from ort_ascend_ops import attach_functions, function_protos, make_op_model, make_session, register_schemas
from ort_ascend_ops.opschema import load_op_specs
from ort_ascend_ops.reference import checks, portable
from ort_ascend_ops.reference.registry import FUNCTIONS, VARIANTS, function_for
from ort_ascend_ops.training import build_training_model

NEWEST = onnx.defs.onnx_opset_version()
OPSETS = list(range(18, NEWEST + 1))


def small_calls(rng):
    """A valid call of each op and of each variant: (op, inputs, attrs)."""
    return [(op, inputs, attrs) for op, cases in CASES.items() for inputs, attrs in cases.variants(rng)]


def dynamic_types(inputs):
    return {name: (a.dtype, [None] * a.ndim) for name, a in inputs.items()}


def assert_same_results(portable, native, op):
    for out, ref in zip(portable, native, strict=True):
        ref = np.asarray(ref)
        if ref.dtype.kind == "i":
            np.testing.assert_array_equal(out, ref)
        else:
            # The statistics of a row with no key to read are -inf on both paths, exactly.
            out, ref64 = np.asarray(out).astype(np.float64), ref.astype(np.float64)
            infinite = ~np.isfinite(ref64)
            np.testing.assert_array_equal(out[infinite], ref64[infinite], err_msg=op)
            finite = (np.where(infinite, 0, out), np.where(infinite, 0, ref64))
            assert_close(*finite, TOL[F32 if ref.dtype == F32 else ref.dtype])


@pytest.mark.parametrize("opset", OPSETS)
def test_every_op_runs_portably_at_every_opset(opset, rng):
    register_schemas()
    for op, inputs, attrs in small_calls(rng):
        model = make_op_model(op, dynamic_types(inputs), attrs, opset=opset)
        onnx.checker.check_model(model, full_check=True)
        native = make_session(model).run(inputs)
        portable = make_session(model, native=False).run(inputs)
        assert_same_results(portable, native, op)


@pytest.mark.parametrize("opset", [17, NEWEST + 1])
def test_opsets_outside_the_range_are_refused(opset):
    with pytest.raises(ValueError, match="opset 18 to"):
        function_protos(opset)
    with pytest.raises(ValueError, match="opset 18 to"):
        make_op_model("RmsNorm", {"x": (F32, [2, 4]), "gamma": (F32, [4])}, opset=opset)


@pytest.mark.parametrize("opset", OPSETS)
def test_function_protos_are_emitted_at_the_opset(opset):
    protos = function_protos(opset)
    assert {p.name for p in protos} >= set(FUNCTIONS)
    for proto in protos:
        assert {o.version for o in proto.opset_import if o.domain == ""} == {opset}
        names = [n.name for n in proto.node if n.name]
        assert len(names) == len(set(names)), proto.name


def test_the_default_functions_serve_float32_and_float16_nodes_with_any_optional_inputs(rng):
    # function_protos() alone (the contract's portable model): each op's function tests for its
    # optional inputs at run time. They serve a boolean attention mask (a uint8 one takes the
    # overload attach_functions adds).
    for op, inputs, attrs in small_calls(rng):
        inputs = {n: a.astype(bool) if n == "atten_mask" else a for n, a in inputs.items()}
        if any(a.dtype == BF16 for a in inputs.values()) or any(
            a.dtype == np.int32 for n, a in inputs.items() if n.startswith("actual_seq_lengths")
        ):
            inputs = {n: a.astype(F16) if a.dtype == BF16 else a for n, a in inputs.items()}
            inputs = {n: a.astype(np.int64) if n.startswith("actual_seq") else a for n, a in inputs.items()}
        model = make_op_model(op, dynamic_types(inputs), attrs, with_functions=False)
        model.functions.extend(function_protos())
        native = make_session(model).run(inputs)
        assert_same_results(make_session(model, native=False).run(inputs), native, op)


def test_one_model_with_two_kinds_of_nodes_gets_one_overload_each(rng):
    inputs = rope_inputs(rng, ROPE_LAYOUTS[0], BF16, "dy", "cos", "sin", "x")
    bf16 = TensorProto.BFLOAT16
    nodes = [
        helper.make_node("RotaryPositionEmbeddingGrad", ["dy", "cos", "sin", "x"], ["dx", "dcos", ""],
                         domain="ort_ascend_ops", mode=1),
        helper.make_node("RotaryPositionEmbeddingGrad", ["dy", "cos", "sin", ""], ["dx2", "", ""],
                         domain="ort_ascend_ops", mode=1),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "two",
        [helper.make_tensor_value_info(n, bf16, a.shape) for n, a in inputs.items()],
        [
            helper.make_tensor_value_info(n, bf16, inputs[like].shape)
            for n, like in [("dx", "dy"), ("dcos", "cos"), ("dx2", "dy")]
        ],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ort_ascend_ops", 1)],
        ir_version=9,
    )
    attach_functions(model)
    assert model.ir_version == 10
    assert [n.overload for n in model.graph.node] == ["x", "no_x"]
    overloads = {f.overload for f in model.functions if f.name == "RotaryPositionEmbeddingGrad"}
    assert overloads == {"x", "no_x"}
    onnx.checker.check_model(model, full_check=True)
    native = make_session(model).run(inputs)
    portable = make_session(model, native=False).run(inputs)
    assert_same_results(portable, native, "RotaryPositionEmbeddingGrad")
    np.testing.assert_array_equal(np.asarray(portable[0], F32), np.asarray(portable[2], F32))


def test_attaching_again_replaces_the_functions(rng):
    model = make_op_model("RmsNorm", {"x": (F32, [2, 4]), "gamma": (F32, [4])})
    before = [f.SerializeToString() for f in model.functions]
    attach_functions(model)
    assert [f.SerializeToString() for f in model.functions] == before


def test_the_type_codes_tell_the_types_apart():
    # Each T and index type gets its code on ONNX Runtime and onnx.reference; no other type
    # takes one of them.
    codes = {
        F32: checks.TYPE_FLOAT32,
        F16: checks.TYPE_FLOAT16,
        BF16: checks.TYPE_BFLOAT16,
        np.dtype(np.int32): checks.TYPE_INT32,
        np.dtype(np.int64): checks.TYPE_INT64,
    }
    others = [np.float64, np.int8, np.int16, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]
    proto = checks.ElemType.to_function_proto()
    for dtype in [*codes, *map(np.dtype, others)]:
        elem = helper.np_dtype_to_tensor_dtype(dtype)
        node = helper.make_node("ElemType", ["x"], ["code"], domain="ort_ascend_ops")
        graph = helper.make_graph(
            [node],
            "code",
            [helper.make_tensor_value_info("x", elem, [1])],
            [helper.make_tensor_value_info("code", TensorProto.INT64, [])],
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", 23), helper.make_opsetid("ort_ascend_ops", 1)],
            ir_version=10,
            functions=[proto],
        )
        feed = {"x": np.zeros(1, dtype)}
        session = make_session(model, native=False)
        results = {int(session.run(feed)[0]), int(ReferenceEvaluator(model).run(None, feed)[0])}
        assert results == ({codes[dtype]} if dtype in codes else results - set(codes.values())), dtype
        assert len(results) == 1, dtype


def refused_calls(rng):
    """Every op's calls the contract refuses, by name: (op, inputs, attrs, outputs, word)."""
    return {
        f"{op}: {name}": (op, *call)
        for op, cases in CASES.items()
        for name, call in cases.refused(rng).items()
    }


REFUSED = list(refused_calls(np.random.default_rng(0)))


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("case", REFUSED)
def test_refused_inputs_are_errors_naming_the_op_and_the_rule_on_both_paths(case, threads, rng):
    op, inputs, attrs, outputs, word = refused_calls(rng)[case]
    model = raw_model(op, inputs, outputs, attrs)
    for native in (True, False):
        with pytest.raises(Exception) as error:
            make_session(model, native=native, threads=threads).run(fed(inputs))
        message = str(error.value)
        assert type(error.value).__module__.startswith("onnxruntime"), message
        assert op in message and word in message, f"native={native}: {message}"


def test_a_node_without_x_that_asks_for_dcos_gets_a_function_that_refuses_it(rng):
    inputs = rope_inputs(rng, ROPE_LAYOUTS[0], F32, "dy", "cos", "sin")
    model = raw_model("RotaryPositionEmbeddingGrad", inputs, {"dx": F32, "dcos": F32, "dsin": F32})
    (function,) = [f for f in model.functions if f.name == "RotaryPositionEmbeddingGrad"]
    assert any("output dcos needs input x" in n.name for n in function.node)
    with pytest.raises(ort.capi.onnxruntime_pybind11_state.InvalidArgument, match="dcos needs input x"):
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)


def test_nan_scores_rank_alike_on_both_paths():
    # Scores -1, NaN, -inf, -3, NaN, -2 (weight -1 on relu(key)): NaN ranks after every number,
    # -inf included, and NaNs among themselves by key index.
    key = np.array([1.0, np.nan, np.inf, 3.0, np.nan, 2.0], F32).reshape(1, 6, 1, 1)
    inputs = {"query": np.ones((1, 1, 1, 1), F32), "key": key, "weights": -np.ones((1, 1, 1), F32)}
    model = make_op_model("LightningIndexer", dynamic_types(inputs), {"sparse_mode": 0, "sparse_count": 6})
    for native in (True, False):
        indices, values = make_session(model, native=native).run(inputs)
        np.testing.assert_array_equal(indices[0, 0], [0, 5, 3, 2, 1, 4])
        np.testing.assert_array_equal(values[0, 0], [-1, -2, -3, -np.inf, np.nan, np.nan])


def test_every_variant_is_emitted_with_its_rules_resolved():
    # Emission fails on a rule that names an input its caller did not pass, and on two checks of
    # one rule in one function.
    emitter = portable._emitter(portable.DEFAULT_ONNX_OPSET)
    for op, variants in VARIANTS.items():
        for overload, function in variants.values():
            root = emitter.emit(function, op, overload)
            assert (root.name, root.overload) == (op, overload)


@pytest.mark.parametrize("opset", OPSETS)
def test_training_graphs_build_and_run_at_every_opset(opset, rng):
    # The two-node model (MatMul, ReduceMean), with an RmsNorm between for our functions.
    x, w = rng.standard_normal((4, 8)).astype(F32), rng.standard_normal((8, 8)).astype(F32)
    gamma = rng.standard_normal(8).astype(F32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("RmsNorm", ["h", "gamma"], ["y", ""], domain="ort_ascend_ops"),
        helper.make_node("ReduceMean", ["y"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "block",
        [
            helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
            for n, a in (("x", x), ("w", w), ("gamma", gamma))
        ],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("ort_ascend_ops", 1)]
    )
    training = build_training_model(model, loss="loss", wrt=["w", "gamma"])
    feeds = {"x": x, "w": w, "gamma": gamma}
    h = x.astype(np.float64) @ w
    rstd = 1 / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-6)
    dh, dgamma = rms_norm_grad_oracle(np.full(h.shape, 1 / h.size), h, rstd, gamma)
    for native in (True, False):
        loss, w_grad, gamma_grad = make_session(training, native=native).run(feeds)
        y = h * rstd * gamma  # a mean of terms of both signs: its error is relative to theirs
        assert abs(loss - np.mean(y)) <= TOL[F32] * np.mean(np.abs(y))
        assert_close(gamma_grad, dgamma, TOL[F32])
        # Each row of dh sums to about 0 (the gradient of a normalized row's mean), so the float32
        # products cancel: 1e-4 of the float64 result.
        assert_close(w_grad, x.astype(np.float64).T @ dh, 1e-4)


def test_the_functions_run_eagerly_on_onnx_runtime(rng):
    # onnxscript's default eager evaluator runs each op on ONNX Runtime (the other tests' eager
    # engine uses onnx.reference), which takes no NumPy bfloat16: float16 in its place.
    for op, inputs, attrs in small_calls(rng):
        inputs = {n: a.astype(F16) if a.dtype == BF16 else a for n, a in inputs.items()}
        model = make_op_model(op, dynamic_types(inputs), attrs)
        _, function = function_for(op, inputs)
        results = function(**inputs, **attrs)
        results = results if isinstance(results, tuple) else (results,)
        produced = {o.name for o in model.graph.output}
        names = [p.name for p in load_op_specs()[op].outputs]
        eager = [r for name, r in zip(names, results, strict=True) if name in produced]
        assert_same_results(eager, make_session(model).run(inputs), op)
