"""Gradient rules of the standard ops: each op alone in a float64 model whose loss is
sum(output * R) (R random), differentiated by build_training_model and checked against central
finite differences of the loss; a small MLP against a NumPy float64 backprop; and the errors."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ort_ascend_ops import make_session
from ort_ascend_ops.training import RULES, GradientError, build_training_model

F64 = TensorProto.DOUBLE


def _positive(shape):
    return lambda rng: rng.uniform(0.5, 2.0, shape)


def _normal(shape):
    return lambda rng: rng.standard_normal(shape)


def _away_from_zero(shape):
    # Relu's kink and ReduceMax's ties would make finite differences meaningless.
    return lambda rng: rng.choice([-1, 1], shape) * rng.uniform(0.2, 2.0, shape)


# (id, op, differentiable inputs: name -> generator, constant inputs: name -> array, attrs, outputs)
CASES = [
    ("matmul-2d", "MatMul", {"a": _normal((3, 4)), "b": _normal((4, 5))}, {}, {}, 1),
    ("matmul-batch-broadcast", "MatMul", {"a": _normal((2, 1, 3, 4)), "b": _normal((3, 4, 5))}, {}, {}, 1),
    (
        "gemm",
        "Gemm",
        {"a": _normal((3, 4)), "b": _normal((4, 5)), "c": _normal((5,))},
        {},
        {"alpha": 0.5, "beta": 2.0},
        1,
    ),
    (
        "gemm-transposed",
        "Gemm",
        {"a": _normal((4, 3)), "b": _normal((5, 4)), "c": _normal((3, 1))},
        {},
        {"transA": 1, "transB": 1},
        1,
    ),
    ("add-broadcast", "Add", {"a": _normal((3, 1, 4)), "b": _normal((5, 4))}, {}, {}, 1),
    ("sum-broadcast", "Sum", {"a": _normal((2, 3)), "b": _normal((3,)), "c": _normal((1, 1))}, {}, {}, 1),
    ("sub-broadcast", "Sub", {"a": _normal((2, 3)), "b": _normal((3,))}, {}, {}, 1),
    ("mul-fan-out", "Mul", {"a": _normal((2, 3))}, {}, {}, 1),  # Mul(a, a): both gradients add up
    ("mul-broadcast", "Mul", {"a": _normal((2, 3, 4)), "b": _normal((1, 3, 1))}, {}, {}, 1),
    ("div", "Div", {"a": _normal((2, 3)), "b": _positive((2, 1))}, {}, {}, 1),
    ("neg", "Neg", {"a": _normal((4,))}, {}, {}, 1),
    ("pow-3", "Pow", {"a": _normal((2, 3))}, {"e": np.array(3.0)}, {}, 1),
    ("pow-half", "Pow", {"a": _positive((2, 3))}, {"e": np.array([0.5])}, {}, 1),
    ("sqrt", "Sqrt", {"a": _positive((2, 3))}, {}, {}, 1),
    ("exp", "Exp", {"a": _normal((2, 3))}, {}, {}, 1),
    ("log", "Log", {"a": _positive((2, 3))}, {}, {}, 1),
    ("relu", "Relu", {"a": _away_from_zero((3, 4))}, {}, {}, 1),
    ("sigmoid", "Sigmoid", {"a": _normal((3, 4))}, {}, {}, 1),
    ("tanh", "Tanh", {"a": _normal((3, 4))}, {}, {}, 1),
    (
        "where",
        "Where",
        {"a": _normal((2, 3)), "b": _normal((3,))},
        {"cond": np.array([[True, False, True], [False, False, True]])},
        {},
        1,
    ),
    ("identity", "Identity", {"a": _normal((2, 3))}, {}, {}, 1),
    ("softmax", "Softmax", {"a": _normal((2, 3, 4))}, {}, {}, 1),
    ("softmax-axis-1", "Softmax", {"a": _normal((2, 3, 4))}, {}, {"axis": 1}, 1),
    ("log-softmax", "LogSoftmax", {"a": _normal((3, 5))}, {}, {"axis": 0}, 1),
    ("reduce-sum", "ReduceSum", {"a": _normal((2, 3, 4))}, {"axes": np.array([1])}, {"keepdims": 0}, 1),
    ("reduce-sum-all", "ReduceSum", {"a": _normal((2, 3))}, {}, {}, 1),
    ("reduce-mean", "ReduceMean", {"a": _normal((2, 3, 4))}, {"axes": np.array([-1, 0])}, {"keepdims": 1}, 1),
    ("reduce-max", "ReduceMax", {"a": _normal((3, 5))}, {"axes": np.array([1])}, {"keepdims": 0}, 1),
    ("transpose", "Transpose", {"a": _normal((2, 3, 4))}, {}, {"perm": [1, 2, 0]}, 1),
    ("reshape", "Reshape", {"a": _normal((2, 6))}, {"shape": np.array([3, -1])}, {}, 1),
    ("flatten", "Flatten", {"a": _normal((2, 3, 4))}, {}, {"axis": 2}, 1),
    ("squeeze", "Squeeze", {"a": _normal((2, 1, 3))}, {"axes": np.array([1])}, {}, 1),
    ("unsqueeze", "Unsqueeze", {"a": _normal((2, 3))}, {"axes": np.array([0, 3])}, {}, 1),
    ("expand", "Expand", {"a": _normal((3, 1))}, {"shape": np.array([2, 3, 4])}, {}, 1),
    (
        "concat",
        "Concat",
        {"a": _normal((2, 3)), "b": _normal((2, 1)), "c": _normal((2, 2))},
        {},
        {"axis": -1},
        1,
    ),
    ("split", "Split", {"a": _normal((2, 5))}, {"split": np.array([2, 3])}, {"axis": 1}, 2),
    ("split-one-output-used", "Split", {"a": _normal((4, 3))}, {}, {"num_outputs": 2}, 1),
    (
        "slice",
        "Slice",
        {"a": _normal((5, 6))},
        {
            "starts": np.array([4, 1]),
            "ends": np.array([0, 100]),
            "axes": np.array([0, 1]),
            "steps": np.array([-2, 2]),
        },
        {},
        1,
    ),
    ("gather", "Gather", {"a": _normal((5, 3))}, {"indices": np.array([[0, 4], [-1, 0]])}, {"axis": 0}, 1),
    ("gather-axis-1", "Gather", {"a": _normal((2, 4))}, {"indices": np.array([3, 3, 1])}, {"axis": 1}, 1),
]
INT_CONSTANTS = {"axes", "shape", "split", "starts", "ends", "steps", "indices"}


def single_op_model(op, inputs, constants, attrs, outputs, output_shapes):
    """loss = sum_i ReduceSum(output_i * r_i) over the first `outputs` outputs of one `op` node."""
    names = list(inputs) + list(constants)
    if op == "Mul" and len(inputs) == 1:
        names = ["a", "a"]
    if op == "Where":
        names = ["cond", "a", "b"]
    total = len(output_shapes)
    node = helper.make_node(op, names, [f"y{i}" for i in range(total)], **attrs)
    nodes, terms = [node], []
    for i in range(outputs):
        nodes.append(helper.make_node("Mul", [f"y{i}", f"r{i}"], [f"t{i}"]))
        nodes.append(helper.make_node("ReduceSum", [f"t{i}"], [f"s{i}"], keepdims=0))
        terms.append(f"s{i}")
    nodes.append(helper.make_node("Sum", terms, ["loss"]))
    graph_inputs = [helper.make_tensor_value_info(n, F64, a.shape) for n, a in inputs.items()]
    graph_inputs += [helper.make_tensor_value_info(f"r{i}", F64, output_shapes[i]) for i in range(outputs)]
    initializers = [
        numpy_helper.from_array(
            np.asarray(v, np.int64 if n in INT_CONSTANTS else (bool if v.dtype == bool else np.float64)), n
        )
        for n, v in constants.items()
    ]
    graph = helper.make_graph(
        nodes, op, graph_inputs, [helper.make_tensor_value_info("loss", F64, [])], initializers
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def output_shapes(op, inputs, constants, attrs):
    names = list(inputs) + list(constants)
    if op == "Mul" and len(inputs) == 1:
        names = ["a", "a"]
    if op == "Where":
        names = ["cond", "a", "b"]
    count = 2 if op == "Split" else 1
    node = helper.make_node(op, names, [f"y{i}" for i in range(count)], **attrs)
    graph = helper.make_graph(
        [node],
        op,
        [helper.make_tensor_value_info(n, F64, a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(f"y{i}", F64, None) for i in range(count)],
        [
            numpy_helper.from_array(
                np.asarray(v, np.int64 if n in INT_CONSTANTS else (bool if v.dtype == bool else np.float64)),
                n,
            )
            for n, v in constants.items()
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    return [y.shape for y in make_session(model, native=False).run(inputs)]


def central_differences(session, feeds, name, step=1e-6):
    grad = np.zeros_like(feeds[name])
    for index in np.ndindex(grad.shape):
        values = []
        for sign in (1, -1):
            moved = feeds[name].copy()
            moved[index] += sign * step
            values.append(session.run(feeds | {name: moved})[0])
        grad[index] = (values[0] - values[1]) / (2 * step)
    return grad


@pytest.mark.parametrize(
    ("op", "generators", "constants", "attrs", "outputs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_rule_matches_finite_differences(op, generators, constants, attrs, outputs, rng):
    inputs = {name: make(rng) for name, make in generators.items()}
    shapes = output_shapes(op, inputs, constants, attrs)
    model = single_op_model(op, inputs, constants, attrs, outputs, shapes)
    feeds = inputs | {f"r{i}": rng.standard_normal(shapes[i]) for i in range(outputs)}
    training = build_training_model(model, "loss", list(inputs))
    results = make_session(training).run(feeds)
    forward = make_session(model)
    for name, grad in zip(inputs, results[1:], strict=True):
        assert grad.shape == inputs[name].shape and grad.dtype == np.float64
        reference = central_differences(forward, feeds, name)
        assert np.linalg.norm(grad - reference) <= 1e-6 * max(np.linalg.norm(reference), 1e-12), name


def as_float32(model):
    """The same model in float32: every float64 input, output and initializer retyped."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for value in [*model.graph.input, *model.graph.output]:
        if value.type.tensor_type.elem_type == F64:
            value.type.tensor_type.elem_type = TensorProto.FLOAT
    for index, init in enumerate(model.graph.initializer):
        if init.data_type == F64:
            array = numpy_helper.to_array(init).astype(np.float32)
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(array, init.name))
    return model


@pytest.mark.parametrize(
    ("op", "generators", "constants", "attrs", "outputs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_float32_rule_matches_float64(op, generators, constants, attrs, outputs, rng):
    # The rules' constants take the value's type: float32 gradients agree with float64 ones.
    inputs = {name: make(rng) for name, make in generators.items()}
    shapes = output_shapes(op, inputs, constants, attrs)
    model = single_op_model(op, inputs, constants, attrs, outputs, shapes)
    feeds = inputs | {f"r{i}": rng.standard_normal(shapes[i]) for i in range(outputs)}
    reference = make_session(build_training_model(model, "loss", list(inputs))).run(feeds)
    single = {name: a.astype(np.float32) for name, a in feeds.items()}
    results = make_session(build_training_model(as_float32(model), "loss", list(inputs))).run(single)
    for out, ref in zip(results, reference, strict=True):
        assert out.dtype == np.float32
        assert np.linalg.norm(out - ref) <= 1e-5 * max(np.linalg.norm(ref), 1e-6)


def test_every_standard_rule_is_exercised():
    tested = {c[1] for c in CASES}
    standard = {op for domain, op in RULES if domain == ""} - {"RMSNormalization", "RotaryEmbedding"}
    assert standard <= tested | {"Cast"}


def test_cast_round_trip(rng):
    # float32 -> float64 -> loss: the gradient comes back as float32.
    x = rng.standard_normal((3, 4)).astype(np.float32)
    nodes = [
        helper.make_node("Cast", ["x"], ["xd"], to=F64),
        helper.make_node("Mul", ["xd", "r"], ["t"]),
        helper.make_node("ReduceSum", ["t"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "cast",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("r", F64, [3, 4]),
        ],
        [helper.make_tensor_value_info("loss", F64, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    r = rng.standard_normal((3, 4))
    _, grad = make_session(build_training_model(model, "loss", ["x"])).run({"x": x, "r": r})
    assert grad.dtype == np.float32
    np.testing.assert_allclose(grad, r.astype(np.float32), rtol=1e-7)


def mlp_model(batch_dim):
    """loss = mean(relu(x W1 + b1) W2 ** 2) with x's batch axis `batch_dim` (an int or a name)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["y"]),
        helper.make_node("Mul", ["y", "y"], ["y2"]),
        helper.make_node("ReduceMean", ["y2"], ["loss"], keepdims=0),
    ]
    inputs = [
        helper.make_tensor_value_info("x", F64, [batch_dim, 4]),
        helper.make_tensor_value_info("w1", F64, [4, 6]),
        helper.make_tensor_value_info("b1", F64, [6]),
        helper.make_tensor_value_info("w2", F64, [6, 3]),
    ]
    graph = helper.make_graph(nodes, "mlp", inputs, [helper.make_tensor_value_info("loss", F64, [])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


@pytest.mark.parametrize("batch_dim", [5, "batch"], ids=["static", "symbolic"])
def test_mlp_matches_numpy_backprop(batch_dim, rng):
    feeds = {
        "x": rng.standard_normal((5, 4)),
        "w1": rng.standard_normal((4, 6)),
        "b1": rng.standard_normal(6),
        "w2": rng.standard_normal((6, 3)),
    }
    training = build_training_model(mlp_model(batch_dim), "loss", ["w1", "b1", "w2", "x"])
    loss, *grads = make_session(training).run(feeds)
    x, w1, b1, w2 = feeds.values()
    h1 = x @ w1 + b1
    h = np.maximum(h1, 0)
    y = h @ w2
    dy = 2 * y / y.size
    dh1 = (dy @ w2.T) * (h1 > 0)
    expected = {"w1": x.T @ dh1, "b1": dh1.sum(0), "w2": h.T @ dy, "x": dh1 @ w1.T}
    assert loss == pytest.approx(np.mean(y * y), rel=1e-12)
    for name, grad in zip(["w1", "b1", "w2", "x"], grads, strict=True):
        np.testing.assert_allclose(grad, expected[name], rtol=1e-10, atol=1e-12)


def test_op_without_rule_is_named():
    model = mlp_model(5)
    model.graph.node[2].op_type = "Erf"
    model.graph.node[2].name = "activation"
    with pytest.raises(GradientError, match="no gradient rule for ai.onnx::Erf \\(node 'activation'"):
        build_training_model(model, "loss", ["w1"])


def test_ops_off_the_path_need_no_rule(rng):
    model = mlp_model(5)
    model.graph.node[2].op_type = "Erf"  # between w1 and the loss, not between w2 and it
    training = build_training_model(model, "loss", ["w2"])
    assert [o.name for o in training.graph.output] == ["loss", "w2_grad"]


@pytest.mark.parametrize(
    ("loss", "wrt", "message"),
    [("y", ["w1"], "is not an output"), ("loss", ["h"], "neither a graph input nor an initializer")],
)
def test_bad_requests(loss, wrt, message):
    with pytest.raises(GradientError, match=message):
        build_training_model(mlp_model(5), loss, wrt)


def test_result_passes_checker_and_strict_inference():
    training = build_training_model(mlp_model("batch"), "loss", ["w1", "b1"])
    onnx.checker.check_model(training, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(training, strict_mode=True)
    outputs = {o.name: o.type.tensor_type for o in inferred.graph.output}
    assert [d.dim_value for d in outputs["w1_grad"].shape.dim] == [4, 6]
    assert outputs["b1_grad"].elem_type == F64
