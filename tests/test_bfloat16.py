"""bfloat16 models on ONNX Runtime's CPU (``widen_bfloat16``, applied by ``make_session``): the
table of the ops that run as they are is kept honest by probing ONNX Runtime, and the widened ops
compute as PyTorch's CPU does, in float32 with each op's result rounded to bfloat16, checked
against float64 NumPy oracles that round where PyTorch would."""

import numpy as np
import onnx
import onnx.inliner
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidGraph, NotImplemented

from oracles import (
    BF16,
    F32,
    ROPE_LAYOUTS,
    lightning_indexer_grad_inputs,
    rms_norm_grad_inputs,
    rms_norm_grad_oracle,
    rms_norm_oracle,
    rope_inputs,
)
from ort_ascend_ops import DOMAIN, attach_functions, make_op_model, make_session
from ort_ascend_ops.bfloat16 import RUNS_IN_BFLOAT16, widen_bfloat16

B, F, I64, BOOL = TensorProto.BFLOAT16, TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
NEWEST = onnx.defs.onnx_opset_version()
TOL = 2.0**-8  # relative: twice bfloat16's unit roundoff
_VALUE = helper.make_tensor("value", B, [1], [1.5])


def info(name, elem, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def model_of(nodes, inputs, outputs, opset=23, initializers=(), functions=(), domains=()):
    """A model of ``nodes``; ``inputs`` and ``outputs`` are (name, element type) pairs."""
    graph = helper.make_graph(
        nodes, "g", [info(n, t) for n, t in inputs], [info(n, t) for n, t in outputs], initializers
    )
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, 1) for d in domains)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10, functions=list(functions))


def run(model, **inputs):
    return make_session(model).run(inputs)


def rounded(a):
    """An op's exact result rounded to bfloat16, as PyTorch rounds each op's."""
    return np.asarray(a, np.float64).astype(BF16)


def f64(a):
    return np.asarray(a).astype(np.float64)


def assert_close(out, ref):
    assert out.dtype == BF16 and out.shape == ref.shape
    err = np.linalg.norm(f64(out) - f64(ref))
    assert err <= TOL * np.linalg.norm(f64(ref)), f"relative error {err / np.linalg.norm(f64(ref)):.3g}"


def assert_same(out, ref):
    assert out.dtype == ref.dtype and out.shape == ref.shape
    np.testing.assert_array_equal(out.view(np.uint16), ref.view(np.uint16))


# ---------------------------------------------------------------------------------------------
# The table, against ONNX Runtime


def _identity_graph(name, inputs, outputs):
    """A subgraph passing each of ``inputs`` to ``outputs``, declared bfloat16."""
    nodes = [helper.make_node("Identity", [i], [o]) for i, o in zip(inputs, outputs, strict=True)]
    return helper.make_graph(nodes, name, [], [info(o, B) for o in outputs])


def _constant_graph(name):
    return helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=_VALUE)], name, [], [info("k", B)]
    )


def _loop_body():
    body = _identity_graph("body", ["c_in", "v_in"], ["c_out", "v_out"])
    body.input.extend([info("i", I64, []), info("c_in", BOOL, []), info("v_in", B)])
    body.output[0].CopyFrom(info("c_out", BOOL, []))
    return body


def _scan_body():
    body = _identity_graph("body", ["s_in", "x_in"], ["s_out", "y"])
    body.input.extend([info("s_in", B), info("x_in", B)])
    return body


# One node of each op in the table, bfloat16 in and out: (inputs, outputs, attributes).
PROBES = {
    "BitCast": ([("x", B)], [("y", TensorProto.FLOAT16)], {"to": TensorProto.FLOAT16}),
    "Cast": ([("x", B)], [("y", F)], {"to": F}),
    "CastLike": ([("x", F), ("like", B)], [("y", B)], {}),
    "Compress": ([("x", B), ("c", BOOL)], [("y", B)], {}),
    "Concat": ([("a", B), ("b", B)], [("y", B)], {"axis": 0}),
    "Constant": ([], [("y", B)], {"value": _VALUE}),
    "ConstantOfShape": ([("s", I64)], [("y", B)], {"value": _VALUE}),
    "DepthToSpace": ([("x", B)], [("y", B)], {"blocksize": 2}),
    "Flatten": ([("x", B)], [("y", B)], {}),
    "Gather": ([("x", B), ("i", I64)], [("y", B)], {}),
    "GatherElements": ([("x", B), ("i", I64)], [("y", B)], {}),
    "GatherND": ([("x", B), ("i", I64)], [("y", B)], {}),
    "Identity": ([("x", B)], [("y", B)], {}),
    "If": (
        [("c", BOOL)],
        [("y", B)],
        {"then_branch": _constant_graph("then"), "else_branch": _constant_graph("else")},
    ),
    "IsInf": ([("x", B)], [("y", BOOL)], {}),
    "IsNaN": ([("x", B)], [("y", BOOL)], {}),
    "Loop": ([("m", I64), ("c", BOOL), ("v", B)], [("y", B)], {"body": _loop_body()}),
    "OneHot": ([("i", I64), ("depth", I64), ("values", B)], [("y", B)], {}),
    "Pad": ([("x", B), ("pads", I64), ("constant", B)], [("y", B)], {}),
    "Reshape": ([("x", B), ("s", I64)], [("y", B)], {}),
    "ReverseSequence": ([("x", B), ("lengths", I64)], [("y", B)], {}),
    "Scan": ([("s", B), ("x", B)], [("s_last", B), ("ys", B)], {"body": _scan_body(), "num_scan_inputs": 1}),
    "ScatterElements": ([("x", B), ("i", I64), ("u", B)], [("y", B)], {}),
    "ScatterND": ([("x", B), ("i", I64), ("u", B)], [("y", B)], {}),
    "Shape": ([("x", B)], [("y", I64)], {}),
    "Sign": ([("x", B)], [("y", B)], {}),
    "Slice": ([("x", B), ("starts", I64), ("ends", I64)], [("y", B)], {}),
    "Split": ([("x", B)], [("y", B), ("z", B)], {}),
    "Squeeze": ([("x", B)], [("y", B)], {}),
    "TensorScatter": ([("cache", B), ("update", B)], [("y", B)], {}),
    "Transpose": ([("x", B)], [("y", B)], {}),
    "Unique": ([("x", B)], [("y", B)], {}),
    "Unsqueeze": ([("x", B), ("axes", I64)], [("y", B)], {}),
}

# Ops ONNX Runtime's CPU has no bfloat16 kernel for: the pass widens them.
WIDENED = {
    "Add": ([("a", B), ("b", B)], [("y", B)], {}),
    "Clip": ([("x", B), ("lo", B), ("hi", B)], [("y", B)], {}),
    "Div": ([("a", B), ("b", B)], [("y", B)], {}),
    "Equal": ([("a", B), ("b", B)], [("y", BOOL)], {}),
    "Expand": ([("x", B), ("s", I64)], [("y", B)], {}),
    "MatMul": ([("a", B), ("b", B)], [("y", B)], {}),
    "Max": ([("a", B), ("b", B)], [("y", B)], {}),
    "Mul": ([("a", B), ("b", B)], [("y", B)], {}),
    "Neg": ([("x", B)], [("y", B)], {}),
    "Pow": ([("x", B), ("p", B)], [("y", B)], {}),
    "Reciprocal": ([("x", B)], [("y", B)], {}),
    "ReduceMean": ([("x", B)], [("y", B)], {}),
    "Relu": ([("x", B)], [("y", B)], {}),
    "Sigmoid": ([("x", B)], [("y", B)], {}),
    "Size": ([("x", B)], [("y", I64)], {}),
    "Softmax": ([("x", B)], [("y", B)], {}),
    "Sqrt": ([("x", B)], [("y", B)], {}),
    "Sub": ([("a", B), ("b", B)], [("y", B)], {}),
    "Tile": ([("x", B), ("r", I64)], [("y", B)], {}),
    "Where": ([("c", BOOL), ("a", B), ("b", B)], [("y", B)], {}),
}


def probe_model(op, case, opset):
    inputs, outputs, attrs = case
    node = helper.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], **attrs)
    return model_of([node], inputs, outputs, opset)


def creates_session(model):
    """Whether ONNX Runtime's CPU creates a session for ``model`` as it stands."""
    options = ort.SessionOptions()
    options.log_severity_level = 4  # the refusals are expected
    try:
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except (NotImplemented, InvalidGraph):
        return False
    return True


@pytest.mark.parametrize("op", sorted(RUNS_IN_BFLOAT16))
def test_each_op_in_the_table_runs_in_bfloat16_from_its_opset_on(op):
    since = RUNS_IN_BFLOAT16[op]
    assert creates_session(probe_model(op, PROBES[op], since))
    assert creates_session(probe_model(op, PROBES[op], NEWEST))
    if since > 1:  # and not before: ONNX's schema or ONNX Runtime's kernels refuse bfloat16
        assert not creates_session(probe_model(op, PROBES[op], since - 1))


@pytest.mark.parametrize("op", sorted(WIDENED))
def test_ops_outside_the_table_have_no_bfloat16_kernel_and_run_widened(op):
    assert op not in RUNS_IN_BFLOAT16
    model = probe_model(op, WIDENED[op], NEWEST)
    assert not creates_session(model)
    assert creates_session(widen_bfloat16(model))


# ---------------------------------------------------------------------------------------------
# Widened ops against the oracle


def one_op(op, inputs, attrs=None, outputs=(("y", B),), opset=23, constants=None):
    """A one-node model whose inputs are ``inputs`` (name -> array: graph inputs) and
    ``constants`` (name -> array: initializers)."""
    constants = constants or {}
    elem = {np.dtype(BF16): B, np.dtype(F32): F, np.dtype(np.int64): I64, np.dtype(bool): BOOL}
    names = [*inputs, *constants]
    node = helper.make_node(op, names, [n for n, _ in outputs], **(attrs or {}))
    initializers = [numpy_helper.from_array(a, n) for n, a in constants.items()]
    return model_of([node], [(n, elem[a.dtype]) for n, a in inputs.items()], outputs, opset, initializers)


def test_matmul_accumulates_in_float32_and_rounds_once(rng):
    a = rng.standard_normal((2, 5, 64)).astype(BF16)
    b = rng.standard_normal((64, 7)).astype(BF16)
    (y,) = run(one_op("MatMul", {"a": a, "b": b}), a=a, b=b)
    assert_close(y, rounded(f64(a) @ f64(b)))


def test_add_broadcasts(rng):
    a = rng.standard_normal((2, 3, 8)).astype(BF16)
    b = rng.standard_normal((8,)).astype(BF16)
    (y,) = run(one_op("Add", {"a": a, "b": b}), a=a, b=b)
    assert_close(y, rounded(f64(a) + f64(b)))


def test_softmax(rng):
    x = (4 * rng.standard_normal((3, 16))).astype(BF16)
    (y,) = run(one_op("Softmax", {"x": x}), x=x)
    e = np.exp(f64(x) - f64(x).max(axis=-1, keepdims=True))
    assert_close(y, rounded(e / e.sum(axis=-1, keepdims=True)))


def test_reduce_mean_with_axes(rng):
    x = rng.standard_normal((4, 6, 32)).astype(BF16)
    model = one_op("ReduceMean", {"x": x}, {"keepdims": 1}, constants={"axes": np.array([-1], np.int64)})
    (y,) = run(model, x=x)
    assert_close(y, rounded(f64(x).mean(axis=-1, keepdims=True)))


@pytest.mark.parametrize(
    ("op", "oracle", "low", "high"),
    [
        ("Sigmoid", lambda x: 1 / (1 + np.exp(-x)), -6, 6),
        ("Sqrt", np.sqrt, 0, 100),
        ("Reciprocal", np.reciprocal, 0.5, 4),
        ("Neg", np.negative, -3, 3),
    ],
)
def test_unary(rng, op, oracle, low, high):
    x = rng.uniform(low, high, (5, 24)).astype(BF16)
    (y,) = run(one_op(op, {"x": x}), x=x)
    assert_close(y, rounded(oracle(f64(x))))


def test_pow(rng):
    x = rng.uniform(0.5, 3, (4, 16)).astype(BF16)
    p = rng.uniform(-2, 2, (16,)).astype(BF16)
    (y,) = run(one_op("Pow", {"x": x, "p": p}), x=x, p=p)
    assert_close(y, rounded(f64(x) ** f64(p)))


def test_gather_of_a_bfloat16_table_stays_bfloat16(rng):
    table = rng.standard_normal((10, 8)).astype(BF16)
    indices = rng.integers(0, 10, (2, 3))
    node = helper.make_node("Gather", ["table", "indices"], ["y"])
    model = model_of(
        [node], [("indices", I64)], [("y", B)], initializers=[numpy_helper.from_array(table, "table")]
    )
    assert widen_bfloat16(model) is model  # nothing to widen
    (y,) = run(model, indices=indices)
    assert_same(y, table[indices])


def test_where_picks_bfloat16_values_unchanged(rng):
    c = rng.random((3, 8)) < 0.5
    a, b = rng.standard_normal((2, 3, 8)).astype(BF16)
    (y,) = run(one_op("Where", {"c": c, "a": a, "b": b}), c=c, a=a, b=b)
    assert_same(y, np.where(c, a, b))


def test_expand_copies_bfloat16_values_unchanged(rng):
    x = rng.standard_normal((3, 1)).astype(BF16)
    (y,) = run(one_op("Expand", {"x": x}, constants={"s": np.array([2, 3, 4])}), x=x)
    assert_same(y, np.broadcast_to(x, (2, 3, 4)))


def test_constant_of_shape_bfloat16_feeds_a_widened_op(rng):
    x = rng.standard_normal((2, 3)).astype(BF16)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["half"], value=_VALUE),
        helper.make_node("Mul", ["x", "half"], ["y"]),
    ]
    (y,) = run(model_of(nodes, [("x", B)], [("y", B)]), x=x)
    assert_close(y, rounded(f64(x) * 1.5))


def test_cast_float32_to_bfloat16_and_back_rounds_to_nearest_even():
    # 1 + 3 * 2**-8 lies halfway between 1 + 2**-7 and 1 + 2**-6: to even is the latter.
    x = np.array([1.001, 3.14159, 1 + 3 * 2**-8, -65537.0, 1e-3, np.inf, np.nan], np.float32)
    nodes = [helper.make_node("Cast", ["x"], ["b"], to=B), helper.make_node("Cast", ["b"], ["y"], to=F)]
    (y,) = run(model_of(nodes, [("x", F)], [("y", F)]), x=x)
    np.testing.assert_array_equal(y, x.astype(BF16).astype(np.float32))


def test_each_op_in_a_chain_rounds_its_result(rng):
    """(a + b) * c - a, each op rounded to bfloat16: bit for bit what float32 arithmetic rounded
    after each op gives (an elementwise float32 op is exact before its rounding), and not what
    rounding only at the end gives."""
    a, b, c = rng.standard_normal((3, 256)).astype(BF16)
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"]),
        helper.make_node("Mul", ["s", "c"], ["p"]),
        helper.make_node("Sub", ["p", "a"], ["y"]),
    ]
    (y,) = run(model_of(nodes, [("a", B), ("b", B), ("c", B)], [("y", B)]), a=a, b=b, c=c)
    a32, b32, c32 = (v.astype(F32) for v in (a, b, c))
    per_op = ((((a32 + b32).astype(BF16).astype(F32)) * c32).astype(BF16).astype(F32) - a32).astype(BF16)
    assert_same(y, per_op)
    assert not np.array_equal(y, ((a32 + b32) * c32 - a32).astype(BF16))


def test_matches_pytorch(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((4, 32)).astype(BF16)
    w = rng.standard_normal((32, 16)).astype(BF16)
    bias = rng.standard_normal(16).astype(BF16)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "bias"], ["z"]),
        helper.make_node("Sigmoid", ["z"], ["g"]),
        helper.make_node("Mul", ["z", "g"], ["silu"]),
        helper.make_node("Softmax", ["silu"], ["y"]),
    ]
    model = model_of(nodes, [("x", B), ("w", B), ("bias", B)], [("y", B)])
    (y,) = run(model, x=x, w=w, bias=bias)
    tx, tw, tb = (torch.from_numpy(v.astype(F32)).to(torch.bfloat16) for v in (x, w, bias))
    z = tx @ tw + tb
    ref = torch.softmax(z * torch.sigmoid(z), dim=-1).float().numpy()
    # Float32 results of the same op can differ in their last bit (another summation order,
    # another exp): a bfloat16 rounding may then differ by one unit in the last place.
    ulps = np.abs(y.astype(F32).view(np.int32) - ref.view(np.int32)) >> 16
    assert ulps.max() <= 1 and (ulps == 0).mean() > 0.95


# ---------------------------------------------------------------------------------------------
# What the pass does to a graph


def test_a_float32_model_is_returned_as_it_is(rng):
    x = rng.standard_normal((2, 8)).astype(F32)
    model = one_op("MatMul", {"a": x, "b": x.T.copy()}, outputs=[("y", F)])
    before = model.SerializeToString()
    assert widen_bfloat16(model) is model
    assert model.SerializeToString() == before


def test_a_bfloat16_model_of_table_ops_is_returned_as_it_is():
    nodes = [helper.make_node("Transpose", ["x"], ["t"]), helper.make_node("Cast", ["t"], ["y"], to=F)]
    model = model_of(nodes, [("x", B)], [("y", F)])
    assert widen_bfloat16(model) is model


def _elem_types(model):
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    return {v.name: v.type.tensor_type.elem_type for v in (*graph.input, *graph.output, *graph.value_info)}


def test_every_value_keeps_its_type_and_the_model_is_not_changed(rng):
    nodes = [
        helper.make_node("MatMul", ["x", "x"], ["m"]),
        helper.make_node("Relu", ["m"], ["r"]),
        helper.make_node("Add", ["r", "x"], ["y"]),
    ]
    model = model_of(nodes, [("x", B)], [("y", B)])
    before = model.SerializeToString()
    widened = widen_bfloat16(model)
    assert model.SerializeToString() == before
    kept = _elem_types(model)
    assert {n: t for n, t in _elem_types(widened).items() if n in kept} == kept
    # Three copies to float32 (x once for its three uses, m, r), three results rounded.
    assert [n.op_type for n in widened.graph.node].count("Cast") == 3 + 3


# ONNX Runtime has RandomUniformLike kernels only up to opset 21.
@pytest.mark.parametrize(("op", "opset"), [("EyeLike", 23), ("RandomUniformLike", 21)])
def test_a_dtype_attribute_of_bfloat16_computes_in_float32(op, opset):
    x = np.zeros((3, 3), np.float32)
    model = one_op(op, {"x": x}, {"dtype": B}, opset=opset)
    widened = widen_bfloat16(model)
    assert [n.op_type for n in widened.graph.node] == [op, "Cast"]
    assert helper.get_node_attr_value(widened.graph.node[0], "dtype") == F
    (y,) = run(model, x=x)
    assert y.dtype == BF16 and y.shape == (3, 3)
    if op == "EyeLike":
        assert_same(y, np.eye(3, dtype=BF16))
    else:
        assert ((0 <= f64(y)) & (f64(y) <= 1)).all()


def test_a_scatter_reduction_accumulates_in_float32():
    """ONNX Runtime refuses ScatterElements' 'add' for bfloat16 only as it runs; widened it sums in
    float32 and rounds once, as torch.scatter_add does: 1 + 2**-8 + 2**-8 is 1 + 2**-7, where
    rounding each sum to bfloat16 would give 1."""
    x = np.zeros(1, BF16)
    updates = np.array([1, 2**-8, 2**-8], BF16)
    model = one_op(
        "ScatterElements", {"x": x, "i": np.zeros(3, np.int64), "u": updates}, {"reduction": "add"}
    )
    (y,) = run(model, x=x, i=np.zeros(3, np.int64), u=updates)
    assert_same(y, np.array([1 + 2**-7], BF16))


def test_nodes_in_if_and_loop_bodies_are_widened(rng):
    x = rng.standard_normal((4, 8)).astype(BF16)
    step = rng.standard_normal((4, 8)).astype(BF16)
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [info("t", B)])
    other = helper.make_graph([helper.make_node("Sqrt", ["x"], ["e"])], "else", [], [info("e", B)])
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Add", ["v_in", "step"], ["v_out"]),
        ],
        "body",
        [info("i", I64, []), info("c_in", BOOL, []), info("v_in", B)],
        [info("c_out", BOOL, []), info("v_out", B)],
    )
    nodes = [
        helper.make_node("If", ["c"], ["picked"], then_branch=then, else_branch=other),
        helper.make_node("Loop", ["m", "", "picked"], ["y"], body=body),
    ]
    model = model_of(nodes, [("c", BOOL), ("m", I64), ("x", B), ("step", B)], [("y", B)])
    (y,) = run(model, c=np.array(True), m=np.array(3), x=x, step=step)
    ref = -x
    for _ in range(3):  # the loop-carried value is bfloat16: each sum rounded
        ref = rounded(f64(ref) + f64(step))
    assert_close(y, ref)


def test_a_local_function_of_another_domain_is_inlined_and_widened(rng):
    """A model-local function (here a tanh-free GELU-like x * sigmoid(1.702 x)) is typed only at
    its call sites: the pass inlines it, as ONNX Runtime would."""
    k = helper.make_node("Constant", [], ["k"], value_float=1.702)
    body = [
        k,
        helper.make_node("CastLike", ["k", "x"], ["kx_type"]),
        helper.make_node("Mul", ["x", "kx_type"], ["kx"]),
        helper.make_node("Sigmoid", ["kx"], ["s"]),
        helper.make_node("Mul", ["x", "s"], ["y"]),
    ]
    gelu = helper.make_function("local", "QuickGelu", ["x"], ["y"], body, [helper.make_opsetid("", 23)])
    call = helper.make_node("QuickGelu", ["x"], ["y"], domain="local")
    model = model_of([call], [("x", B)], [("y", B)], functions=[gelu], domains=["local"])
    x = rng.standard_normal((3, 16)).astype(BF16)
    (y,) = run(model, x=x)
    kx = rounded(f64(x) * f64(rounded(1.702)))
    assert_close(y, rounded(f64(x) * f64(rounded(1 / (1 + np.exp(-f64(kx)))))))


# ---------------------------------------------------------------------------------------------
# Our ops among widened ones


@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
def test_rms_norm_then_matmul(rng, native):
    x = rng.standard_normal((2, 8, 64)).astype(BF16)
    gamma = rng.uniform(0.5, 1.5, 64).astype(BF16)
    w = (rng.standard_normal((64, 32)) / 8).astype(BF16)
    nodes = [
        helper.make_node("RmsNorm", ["x", "gamma"], ["h", "rstd"], domain=DOMAIN, epsilon=1e-6),
        helper.make_node("MatMul", ["h", "w"], ["y"]),
    ]
    model = model_of(nodes, [("x", B), ("gamma", B), ("w", B)], [("y", B), ("rstd", F)], domains=[DOMAIN])
    if not native:
        attach_functions(model)
    widened = widen_bfloat16(model)
    assert next(n for n in widened.graph.node if n.domain == DOMAIN).input[:] == ["x", "gamma"]
    y, rstd = make_session(model, native=native).run({"x": x, "gamma": gamma, "w": w})
    h, rstd_ref = rms_norm_oracle(x, gamma, 1e-6)
    assert_close(y, rounded(f64(rounded(h)) @ f64(w)))
    np.testing.assert_allclose(rstd, rstd_ref.astype(np.float32), rtol=1e-5)


def bfloat16_calls(rng):
    """A call of each of our ops with bfloat16 values."""
    rope = rope_inputs(rng, ROPE_LAYOUTS[0], BF16, "dy", "cos", "sin", "x")
    grad = lightning_indexer_grad_inputs(rng, "BSND", 0, BF16, np.int64)
    x = rng.standard_normal((3, 16)).astype(BF16)
    return [
        ("RmsNorm", {"x": x, "gamma": np.ones(16, BF16)}, {}),
        ("RmsNormGrad", rms_norm_grad_inputs(rng, (2, 3, 8), (8,), BF16, BF16), {}),
        ("RotaryPositionEmbedding", {"x": rope["x"], "cos": rope["cos"], "sin": rope["sin"]}, {"mode": 1}),
        ("RotaryPositionEmbeddingGrad", rope, {"mode": 0}),
        (
            "LightningIndexer",
            {n: a for n, a in grad.items() if n not in ("dy", "sparse_indices")},
            {"sparse_mode": 0, "sparse_count": 12},
        ),
        ("LightningIndexerGrad", grad, {"head_num": 3, "sparse_mode": 0}),
    ]


def test_our_reference_functions_need_no_widening(rng):
    """The reference functions compute in float32 already: inlined at bfloat16 call sites, they
    hold no node the pass would widen (it leaves them as they are)."""
    for op, inputs, attrs in bfloat16_calls(rng):
        types = {name: (a.dtype, a.shape) for name, a in inputs.items()}
        inlined = onnx.inliner.inline_local_functions(make_op_model(op, types, attrs))
        assert not any(n.domain == DOMAIN for n in inlined.graph.node)
        assert widen_bfloat16(inlined) is inlined, op


def test_our_functions_stay_when_foreign_ones_are_inlined(rng):
    square = helper.make_function(
        "local",
        "Square",
        ["x"],
        ["y"],
        [helper.make_node("Mul", ["x", "x"], ["y"])],
        [helper.make_opsetid("", 23)],
    )
    nodes = [
        helper.make_node("Square", ["x"], ["s"], domain="local"),
        helper.make_node("RmsNorm", ["s", "gamma"], ["y", "rstd"], domain=DOMAIN),
    ]
    outputs = [("y", B), ("rstd", F)]
    model = model_of(nodes, [("x", B), ("gamma", B)], outputs, functions=[square], domains=["local", DOMAIN])
    attach_functions(model)
    widened = widen_bfloat16(model)
    assert [(f.domain, f.name) for f in widened.functions] == [(DOMAIN, "RmsNorm")]
    x = rng.standard_normal((3, 16)).astype(BF16)
    gamma = rng.uniform(0.5, 1.5, 16).astype(BF16)
    native, portable = (make_session(model, native=n).run({"x": x, "gamma": gamma})[0] for n in (True, False))
    assert_close(native, rounded(rms_norm_oracle(rounded(f64(x) ** 2), gamma, 1e-6)[0]))
    assert_close(portable, native)


def test_a_model_file_with_external_data_is_widened(rng, tmp_path):
    w = rng.standard_normal((16, 8)).astype(BF16)
    model = one_op("MatMul", {"x": np.zeros((2, 16), BF16)}, constants={"w": w})
    onnx.save(model, tmp_path / "model.onnx", save_as_external_data=True, location="w.bin", size_threshold=0)
    x = rng.standard_normal((2, 16)).astype(BF16)
    (y,) = make_session(tmp_path / "model.onnx").run({"x": x})
    assert_close(y, rounded(f64(x) @ f64(w)))


@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
def test_a_bfloat16_training_graph_runs(rng, native):
    """build_training_model's graph of a bfloat16 model (its standard ops around RmsNorm and
    RmsNormGrad: MatMul, Mul, ReduceMean, Expand, Size, Div, Sum, ...) runs on the CPU."""
    from ort_ascend_ops.training import build_training_model

    x = rng.standard_normal((4, 16)).astype(BF16)
    w = (rng.standard_normal((16, 16)) / 4).astype(BF16)
    gamma = rng.uniform(0.5, 1.5, 16).astype(BF16)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("RmsNorm", ["h", "gamma"], ["y", ""], domain=DOMAIN),
        helper.make_node("ReduceMean", ["y"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "block",
        [helper.make_tensor_value_info(n, B, a.shape) for n, a in (("x", x), ("w", w), ("gamma", gamma))],
        [helper.make_tensor_value_info("loss", B, [])],
    )
    opsets = [helper.make_opsetid("", 23), helper.make_opsetid(DOMAIN, 1)]
    model = build_training_model(
        helper.make_model(graph, opset_imports=opsets, ir_version=10), "loss", ["w", "gamma"]
    )
    loss, dw, dgamma = make_session(model, native=native).run({"x": x, "w": w, "gamma": gamma})
    h = rounded(f64(x) @ f64(w))
    y, rstd = rms_norm_oracle(h, gamma, 1e-6)
    assert_close(loss, rounded(f64(rounded(y)).mean()))
    # d loss / d gamma = mean over rows of h * rstd / D, d loss / d w through RmsNorm's backward.
    dy = np.full(h.shape, 1 / h.size)
    dh, dgamma_ref = rms_norm_grad_oracle(dy, h, rstd, gamma)
    assert_close(dgamma, rounded(dgamma_ref))
    assert_close(dw, rounded(f64(x).T @ f64(rounded(dh))))
