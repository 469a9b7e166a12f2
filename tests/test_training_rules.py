"""Gradient rules of the standard ops: each op alone in a float64 model whose loss is
sum(output * R) (R random), differentiated by build_training_model and checked against central
finite differences of the loss, and built at every opset from 18; the loss ops and a small MLP
against NumPy float64 gradients; and the errors."""

import math
from types import SimpleNamespace

import numpy as np
import onnx
import onnx.inliner
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

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


def _away_from(shape, *points):
    # Clip's kinks at its bounds, likewise: values at least 0.1 from each point (0.3 apart or more).
    def make(rng):
        x = rng.uniform(-2.0, 2.0, shape)
        for p in points:
            x = np.where(np.abs(x - p) < 0.1, x + 0.2, x)
        return x

    return make


def _fixed(value):
    return lambda rng: np.array(value, np.float64)


# Max and Min ties: where both inputs are equal each gets half of the gradient, which is what
# central differences moving one input at a time see too.
TIED_A = [[0.5, -1.0, 2.0], [0.25, 1.5, -0.75]]
TIED_B = [[0.5, -2.0, 2.0], [1.25, 1.5, -1.75]]
SCE = "SoftmaxCrossEntropyLoss"
NLL = "NegativeLogLikelihoodLoss"
ND_LABELS = np.array([[[0, 2], [-100, 1]], [[2, 2], [1, -100]]])


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
    ("dropout-inference", "Dropout", {"a": _normal((2, 3))}, {"ratio": np.array(0.5)}, {}, 1),
    (
        "batch-norm-inference",  # training mode: tests/test_orttraining_artifacts.py, against torch
        "BatchNormalization",
        {
            "x": _normal((2, 3, 4)),
            "s": _normal((3,)),
            "b": _normal((3,)),
            "m": _normal((3,)),
            "v": _positive((3,)),
        },
        {},
        {"epsilon": 0.1},
        1,
    ),
    (  # the rest of Conv's and the pools' attributes: tests/test_convolution_rules.py, against torch
        "conv-strided",  # not grouped: onnx.reference's ConvTranspose reads no group but a depthwise one
        "Conv",
        {"x": _normal((2, 4, 5, 6)), "w": _normal((3, 4, 3, 2)), "b": _normal((3,))},
        {},
        {"strides": [2, 2], "pads": [1, 0, 1, 1], "dilations": [1, 2]},
        1,
    ),
    (
        "conv-depthwise-causal",
        "Conv",
        {"x": _normal((2, 3, 6)), "w": _normal((3, 1, 3))},
        {},
        {"group": 3, "pads": [2, 2]},
        1,
    ),
    (
        "max-pool",
        "MaxPool",
        {"a": _normal((2, 3, 5, 5))},
        {},
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
        1,
    ),
    (
        "average-pool-ceil",
        "AveragePool",
        {"a": _normal((2, 3, 5, 6))},
        {},
        # No window starting in the end padding: opset 18's shape inference keeps one, 19's drops it.
        {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 0, 0], "ceil_mode": 1},
        1,
    ),
    ("global-average-pool", "GlobalAveragePool", {"a": _normal((2, 3, 4, 5))}, {}, {}, 1),
    (  # Mamba-2's chunked scan: a batched contraction into a new layout
        "einsum-batched",
        "Einsum",
        {"a": _normal((2, 3, 4, 2)), "b": _normal((2, 3, 5, 2))},
        {},
        {"equation": "bclh,bcsh->bcsl"},
        1,
    ),
    (  # a letter of one operand alone (k), one of the other alone (m), a product of three
        "einsum-summed-letters",
        "Einsum",
        {"a": _normal((3, 2, 4)), "b": _normal((4, 5)), "c": _normal((4, 6))},
        {},
        {"equation": "ikj,jm,jn->ni"},
        1,
    ),
    ("einsum-implicit-one-operand", "Einsum", {"a": _normal((3, 2, 4))}, {}, {"equation": "kij"}, 1),
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
    (
        "slice-unit-steps",  # the gradient is a Pad: negative, clamped and empty bounds
        "Slice",
        {"a": _normal((5, 6, 4))},
        {"starts": np.array([-3, 1, 3]), "ends": np.array([100, -1, 2]), "axes": np.array([0, -2, 2])},
        {},
        1,
    ),
    (
        "slice-whole-axes",
        "Slice",
        {"a": _normal((3, 4))},
        {"starts": np.array([0, 1]), "ends": np.array([2**63 - 1, 3])},
        {},
        1,
    ),
    (
        "slice-default-axes",
        "Slice",
        {"a": _normal((4, 3))},
        {"starts": np.array([1]), "ends": np.array([3])},
        {},
        1,
    ),
    ("gather", "Gather", {"a": _normal((5, 3))}, {"indices": np.array([[0, 4], [-1, 0]])}, {"axis": 0}, 1),
    ("gather-scalar-index", "Gather", {"a": _normal((4, 3))}, {"indices": np.array(-3)}, {"axis": 0}, 1),
    ("gather-axis-1", "Gather", {"a": _normal((2, 4))}, {"indices": np.array([3, 3, 1])}, {"axis": 1}, 1),
    ("reciprocal", "Reciprocal", {"a": _away_from_zero((2, 3))}, {}, {}, 1),
    ("abs", "Abs", {"a": _away_from_zero((3, 4))}, {}, {}, 1),
    ("sin", "Sin", {"a": _normal((2, 3))}, {}, {}, 1),
    ("cos", "Cos", {"a": _normal((2, 3))}, {}, {}, 1),
    ("erf", "Erf", {"a": _normal((2, 3))}, {}, {}, 1),
    ("gelu", "Gelu", {"a": _normal((3, 4))}, {}, {}, 1),
    ("gelu-tanh", "Gelu", {"a": _normal((3, 4))}, {}, {"approximate": "tanh"}, 1),
    ("softplus", "Softplus", {"a": _normal((3, 4))}, {}, {}, 1),
    ("cast-like", "CastLike", {"a": _normal((2, 3))}, {"like": np.array(0.0)}, {}, 1),
    ("max-broadcast", "Max", {"a": _normal((2, 3)), "b": _normal((3,)), "c": _normal((1, 1))}, {}, {}, 1),
    ("max-ties", "Max", {"a": _fixed(TIED_A), "b": _fixed(TIED_B)}, {}, {}, 1),
    ("min-broadcast", "Min", {"a": _normal((2, 1, 3)), "b": _normal((4, 1))}, {}, {}, 1),
    ("min-one-input", "Min", {"a": _normal((3,))}, {}, {}, 1),
    ("min-ties-constant", "Min", {"a": _fixed(TIED_A)}, {"b": np.array(TIED_B)}, {}, 1),
    (
        "clip",
        "Clip",
        {"a": _away_from((3, 4), -0.5, 0.5)},
        {"min": np.array(-0.5), "max": np.array(0.5)},
        {},
        1,
    ),
    ("clip-min-only", "Clip", {"a": _away_from((3, 4), -0.5)}, {"min": np.array(-0.5)}, {}, 1),
    ("clip-max-only", "Clip", {"a": _away_from((3, 4), 0.5)}, {"max": np.array(0.5)}, {}, 1),
    ("clip-no-bounds", "Clip", {"a": _normal((2, 3))}, {}, {}, 1),
    (
        "clip-bounds-differentiable",
        "Clip",
        {"a": _away_from((3, 4), -0.5, 0.5), "min": _fixed(-0.5), "max": _fixed(0.5)},
        {},
        {},
        1,
    ),
    (
        "clip-crossed-bounds",
        "Clip",
        {"a": _normal((2, 3)), "min": _fixed(0.5), "max": _fixed(-0.5)},
        {},
        {},
        1,
    ),
    ("reduce-l2", "ReduceL2", {"a": _normal((2, 3, 4))}, {"axes": np.array([1])}, {"keepdims": 0}, 1),
    ("reduce-l2-all", "ReduceL2", {"a": _normal((2, 3))}, {}, {}, 1),
    ("reduce-l2-noop", "ReduceL2", {"a": _away_from_zero((2, 3))}, {}, {"noop_with_empty_axes": 1}, 1),
    (
        "reduce-sum-square",
        "ReduceSumSquare",
        {"a": _normal((2, 3, 4))},
        {"axes": np.array([0, -1])},
        {"keepdims": 0},
        1,
    ),
    ("reduce-sum-square-keepdims", "ReduceSumSquare", {"a": _normal((2, 3))}, {"axes": np.array([1])}, {}, 1),
    ("pad", "Pad", {"a": _normal((2, 3))}, {"pads": np.array([1, 0, 2, 3])}, {}, 1),
    (
        "pad-crop-axes-value",  # crops one element of axis 2 at the start and one of axis 0 at the end
        "Pad",
        {"a": _normal((2, 3, 4)), "value": _fixed(1.5)},
        {"pads": np.array([-1, 1, 1, -1]), "axes": np.array([2, 0])},
        {},
        1,
    ),
    ("tile", "Tile", {"a": _normal((2, 1, 3))}, {"repeats": np.array([2, 3, 1])}, {}, 1),
    (
        "scatter-nd-rows",
        "ScatterND",
        {"a": _normal((4, 3)), "b": _normal((2, 3))},
        {"indices": np.array([[1], [3]])},
        {},
        1,
    ),
    (
        "scatter-nd-elements-add",
        "ScatterND",
        {"a": _normal((4, 3)), "b": _normal((3,))},
        {"indices": np.array([[0, 1], [2, 2], [0, 1]])},
        {"reduction": "add"},
        1,
    ),
    (
        "gather-elements",
        "GatherElements",
        {"a": _normal((3, 4))},
        {"indices": np.array([[0, 2, -1, 1], [2, 2, 0, 0]])},
        {"axis": 0},
        1,
    ),
    (
        "gather-elements-axis-last",
        "GatherElements",
        {"a": _normal((2, 3))},
        {"indices": np.array([[1, 1, 1, 0], [2, -3, 0, 0]])},
        {"axis": -1},
        1,
    ),
    ("cum-sum", "CumSum", {"a": _normal((3, 4))}, {"axis": np.array(1)}, {}, 1),
    (
        "cum-sum-exclusive-reverse",
        "CumSum",
        {"a": _normal((4, 2))},
        {"axis": np.array(-2)},
        {"exclusive": 1, "reverse": 1},
        1,
    ),
    ("trilu-lower", "Trilu", {"a": _normal((2, 3, 4))}, {"k": np.array(1)}, {"upper": 0}, 1),
    ("trilu-upper", "Trilu", {"a": _normal((4, 3))}, {}, {}, 1),
    ("top-k", "TopK", {"a": _normal((3, 5))}, {"k": np.array([2])}, {"axis": 1}, 1),
    (
        "top-k-smallest-axis-0",
        "TopK",
        {"a": _normal((4, 3))},
        {"k": np.array([3])},
        {"axis": 0, "largest": 0},
        1,
    ),
    (
        "gather-nd",  # the first index tuple twice: its slice's gradient adds up
        "GatherND",
        {"a": _normal((3, 4, 2))},
        {"indices": np.array([[0, 1], [2, -1], [0, 1]])},
        {},
        1,
    ),
    (
        "scatter-elements",
        "ScatterElements",
        {"a": _normal((3, 4)), "b": _normal((2, 4))},
        {"indices": np.array([[0, 1, 2, 0], [2, 0, -2, 1]])},
        {"axis": 0},
        1,
    ),
    (
        "scatter-elements-add",  # an element written twice
        "ScatterElements",
        {"a": _normal((2, 5)), "b": _normal((2, 3))},
        {"indices": np.array([[4, 4, 0], [1, 3, 2]])},
        {"axis": 1, "reduction": "add"},
        1,
    ),
    (
        "one-hot-values",
        "OneHot",
        {"values": _normal((2,))},
        {"indices": np.array([[0, 3], [1, -1]]), "depth": np.array(4)},
        {"axis": 1},
        1,
    ),
    ("sce-mean", SCE, {"a": _normal((4, 3))}, {"labels": np.array([0, 2, 1, 2])}, {}, 1),
    (
        "sce-mean-weights-ignore",
        SCE,
        {"a": _normal((5, 3))},
        {"labels": np.array([0, 1, 2, 1, 2]), "weights": np.array([0.5, 2.0, 1.5])},
        {"ignore_index": 1},
        1,
    ),
    (
        "sce-sum-int32-ignore-outside",  # the ignored label is no class
        SCE,
        {"a": _normal((4, 3))},
        {"labels": np.array([0, -100, 2, 1], np.int32)},
        {"reduction": "sum", "ignore_index": -100},
        1,
    ),
    (
        "sce-none-nd-weights-log-prob",
        SCE,
        {"a": _normal((2, 3, 2, 2))},
        {"labels": ND_LABELS, "weights": np.array([1.5, 0.5, 2.0])},
        {"reduction": "none", "ignore_index": -100},
        2,
    ),
    (
        "sce-mean-nd-log-prob",
        SCE,
        {"a": _normal((2, 4, 3))},
        {"labels": np.array([[0, 3, 1], [2, 2, -1]])},
        {"ignore_index": -1},
        2,
    ),
    ("nll-mean", NLL, {"a": _normal((4, 3))}, {"labels": np.array([2, 0, 1, 1])}, {}, 1),
    (
        "nll-mean-weights-ignore",
        NLL,
        {"a": _normal((5, 3))},
        {"labels": np.array([0, 1, 2, 0, 2]), "weights": np.array([0.5, 2.0, 1.5])},
        {"ignore_index": 0},
        1,
    ),
    (
        "nll-sum-nd-int32",
        NLL,
        {"a": _normal((2, 3, 4))},
        {"labels": np.array([[0, 2, 2, 1], [1, 0, 2, 0]], np.int32)},
        {"reduction": "sum"},
        1,
    ),
    (
        "nll-none-nd-ignore",
        NLL,
        {"a": _normal((2, 3, 2, 2))},
        {"labels": ND_LABELS},
        {"reduction": "none", "ignore_index": -100},
        1,
    ),
]
# The node's inputs by name, where differentiable and constant ones interleave or optional ones
# are left out ("" for a name neither gives); other ops take the differentiable inputs first.
INPUT_ORDER = {
    "Where": ["cond", "a", "b"],
    "Clip": ["a", "min", "max"],
    "Pad": ["a", "pads", "value", "axes"],
    "ScatterND": ["a", "indices", "b"],
    "ScatterElements": ["a", "indices", "b"],
    "OneHot": ["indices", "depth", "values"],
    SCE: ["a", "labels", "weights"],
    NLL: ["a", "labels", "weights"],
}
# ONNX Runtime's CPU has no float64 kernel for these: their float64 models run on onnx.reference.
NO_FLOAT64_KERNEL = {
    "Erf",
    "Gelu",
    "Softplus",
    "OneHot",
    "Conv",
    "ConvTranspose",
    "AveragePool",
    "GlobalAveragePool",
}


def node_inputs(op, inputs, constants):
    if op == "Mul" and len(inputs) == 1:
        return ["a", "a"]
    if op not in INPUT_ORDER:
        return list(inputs) + list(constants)
    names = [n if n in inputs or n in constants else "" for n in INPUT_ORDER[op]]
    while names[-1] == "":
        names.pop()
    return names


def initializer(name, value):
    """Integer and bool constants keep their type; the others are float64."""
    value = np.asarray(value)
    if value.dtype.kind not in "iub":
        value = value.astype(np.float64)
    return numpy_helper.from_array(value, name)


class Erf(OpRun):
    """onnx.reference's Erf rounds to float32: finite differences need float64 (Gelu is expanded
    to its function body, so that it takes this one too)."""

    op_domain = ""

    def _run(self, x):
        return (np.vectorize(math.erf, otypes=[x.dtype])(x),)


def session(model):
    """An ONNX Runtime session, or onnx.reference for the float64 ops ONNX Runtime lacks."""
    float64 = any(i.type.tensor_type.elem_type == F64 for i in model.graph.input)
    if float64 and any(n.op_type in NO_FLOAT64_KERNEL for n in model.graph.node):
        gelu = [("", "Gelu")]
        expanded = onnx.inliner.inline_selected_functions(model, gelu, inline_schema_functions=True)
        evaluator = ReferenceEvaluator(expanded, new_ops=[Erf])
        return SimpleNamespace(run=lambda feeds: evaluator.run(None, feeds))
    return make_session(model)


def single_op_model(op, inputs, constants, attrs, outputs, output_shapes):
    """loss = sum_i ReduceSum(output_i * r_i) over the first `outputs` outputs of one `op` node."""
    total = len(output_shapes)
    node = helper.make_node(op, node_inputs(op, inputs, constants), [f"y{i}" for i in range(total)], **attrs)
    nodes, terms = [node], []
    for i in range(outputs):
        nodes.append(helper.make_node("Mul", [f"y{i}", f"r{i}"], [f"t{i}"]))
        nodes.append(helper.make_node("ReduceSum", [f"t{i}"], [f"s{i}"], keepdims=0))
        terms.append(f"s{i}")
    nodes.append(helper.make_node("Sum", terms, ["loss"]))
    graph_inputs = [helper.make_tensor_value_info(n, F64, a.shape) for n, a in inputs.items()]
    graph_inputs += [helper.make_tensor_value_info(f"r{i}", F64, output_shapes[i]) for i in range(outputs)]
    initializers = [initializer(n, v) for n, v in constants.items()]
    graph = helper.make_graph(
        nodes, op, graph_inputs, [helper.make_tensor_value_info("loss", F64, [])], initializers
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


# The element type of each output of the ops with more than the outputs a case differentiates.
NODE_OUTPUTS = {"Split": [F64, F64], "TopK": [F64, TensorProto.INT64]}


def output_shapes(op, inputs, constants, attrs, outputs):
    types = NODE_OUTPUTS.get(op, [F64] * outputs)
    node = helper.make_node(
        op, node_inputs(op, inputs, constants), [f"y{i}" for i in range(len(types))], **attrs
    )
    graph = helper.make_graph(
        [node],
        op,
        [helper.make_tensor_value_info(n, F64, a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(f"y{i}", t, None) for i, t in enumerate(types)],
        [initializer(n, v) for n, v in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    return [y.shape for y in session(model).run(inputs)]


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
    shapes = output_shapes(op, inputs, constants, attrs, outputs)
    model = single_op_model(op, inputs, constants, attrs, outputs, shapes)
    feeds = inputs | {f"r{i}": rng.standard_normal(shapes[i]) for i in range(outputs)}
    training = build_training_model(model, "loss", list(inputs))
    results = session(training).run(feeds)
    forward = session(model)
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
    shapes = output_shapes(op, inputs, constants, attrs, outputs)
    model = single_op_model(op, inputs, constants, attrs, outputs, shapes)
    feeds = inputs | {f"r{i}": rng.standard_normal(shapes[i]) for i in range(outputs)}
    reference = session(build_training_model(model, "loss", list(inputs))).run(feeds)
    single = {name: a.astype(np.float32) for name, a in feeds.items()}
    results = session(build_training_model(as_float32(model), "loss", list(inputs))).run(single)
    for out, ref in zip(results, reference, strict=True):
        assert out.dtype == np.float32
        assert np.linalg.norm(out - ref) <= 1e-5 * max(np.linalg.norm(ref), 1e-6)


def test_every_standard_rule_is_exercised():
    tested = {c[1] for c in CASES}
    standard = {op for domain, op in RULES if domain == ""} - {"RMSNormalization", "RotaryEmbedding"}
    assert standard <= tested | {"Cast"}


@pytest.mark.parametrize("op", ["Cast", "CastLike"])
def test_cast_round_trip(op, rng):
    # float32 -> float64 -> loss: the gradient comes back as float32.
    x = rng.standard_normal((3, 4)).astype(np.float32)
    cast = (
        helper.make_node("Cast", ["x"], ["xd"], to=F64)
        if op == "Cast"
        else helper.make_node("CastLike", ["x", "like"], ["xd"])
    )
    nodes = [
        cast,
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
        [initializer("like", np.array(0.0))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    r = rng.standard_normal((3, 4))
    _, grad = make_session(build_training_model(model, "loss", ["x"])).run({"x": x, "r": r})
    assert grad.dtype == np.float32
    np.testing.assert_allclose(grad, r.astype(np.float32), rtol=1e-7)


NEWEST = onnx.defs.onnx_opset_version()


@pytest.mark.parametrize(
    ("op", "generators", "constants", "attrs", "outputs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_backward_builds_at_every_opset(op, generators, constants, attrs, outputs, rng):
    # The training model keeps the forward model's opset, so the rules may emit only ops valid
    # at each one from 18 (the first the op exists at) on: build_training_model's checker and
    # strict shape inference refuse any other.
    inputs = {name: make(rng) for name, make in generators.items()}
    model = single_op_model(
        op, inputs, constants, attrs, outputs, output_shapes(op, inputs, constants, attrs, outputs)
    )
    for opset in [v for v in range(18, NEWEST + 1) if onnx.defs.has(op, v)]:
        model.opset_import[0].version = opset
        model.ir_version = helper.find_min_ir_version_for(list(model.opset_import))
        build_training_model(model, "loss", list(inputs))


# Scores' shape, labels, class weights and ignore_index of the loss ops; the last has an ignored
# label that is no class, and spatial axes.
LOSS_VARIANTS = {
    "plain": ((5, 4), np.array([0, 3, 1, 1, 2]), None, None),
    "ignore": ((5, 4), np.array([0, 2, 1, 2, 3]), None, 2),
    "weights-ignore": ((5, 4), np.array([0, 2, 1, 2, 3]), np.array([0.5, 2.0, 1.5, 1.0]), 2),
    "nd-ignore-outside": (
        (2, 4, 3),
        np.array([[0, -100, 3], [1, 1, -100]]),
        np.array([1.0, 0.5, 2.0, 1.5]),
        -100,
    ),
}


def loss_oracle(op, x, labels, weights, ignore_index, reduction, r):
    """sum(loss * r) and its gradient w.r.t. x from the formulas of PyTorch's F.nll_loss and
    F.cross_entropy (ONNX's too): per label -w[label] log_prob[n, label, ...], with weight 0 for
    ignored labels, 'mean' dividing by the total weight of the rest; the gradient
    -c one_hot (NegativeLogLikelihoodLoss) and c (softmax - one_hot) (SoftmaxCrossEntropyLoss)
    with c = w[label] dL/dloss, over the total weight for 'mean'."""
    classes = x.shape[1]
    shift = x - x.max(axis=1, keepdims=True)
    softmax = np.exp(shift) / np.exp(shift).sum(axis=1, keepdims=True)
    log_prob = np.log(softmax) if op == SCE else x
    kept = labels != ignore_index if ignore_index is not None else np.ones(labels.shape, bool)
    safe = np.where(kept, labels, 0)
    w = (np.ones(classes) if weights is None else weights)[safe] * kept
    one_hot = np.moveaxis(np.eye(classes)[safe], -1, 1)
    losses = -w * np.take_along_axis(log_prob, safe[:, None], axis=1)[:, 0]
    total = losses.sum() / w.sum() if reduction == "mean" else losses if reduction == "none" else losses.sum()
    c = (r / w.sum() if reduction == "mean" else r) * w
    grad = c[:, None] * (softmax - one_hot) if op == SCE else -c[:, None] * one_hot
    return np.sum(total * r), grad


@pytest.mark.parametrize("variant", LOSS_VARIANTS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("op", [SCE, NLL])
def test_loss_gradient_matches_numpy(op, reduction, variant, rng):
    shape, labels, weights, ignore_index = LOSS_VARIANTS[variant]
    x = rng.standard_normal(shape)
    constants = {"labels": labels} | ({} if weights is None else {"weights": weights})
    attrs = {"reduction": reduction} | ({} if ignore_index is None else {"ignore_index": ignore_index})
    loss_shape = labels.shape if reduction == "none" else ()
    model = single_op_model(op, {"a": x}, constants, attrs, 1, [loss_shape])
    r = rng.standard_normal(loss_shape)
    loss, grad = make_session(build_training_model(model, "loss", ["a"])).run({"a": x, "r0": r})
    expected_loss, expected_grad = loss_oracle(op, x, labels, weights, ignore_index, reduction, r)
    assert loss == pytest.approx(expected_loss, rel=1e-12)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-10, atol=1e-14)


def test_a_cross_entropy_gradient_is_softmax_scaled_then_the_label_added(rng):
    # One [N, C] buffer from the Exp on (the one-hot is added into it): no zeros of that shape
    # scattered beside it, no Sub of the two. Its values: test_loss_gradient_matches_numpy.
    shape, labels, _, _ = LOSS_VARIANTS["nd-ignore-outside"]
    x = {"a": rng.standard_normal(shape)}
    model = single_op_model(SCE, x, {"labels": labels}, {"ignore_index": -100}, 1, [()])
    training = build_training_model(model, "loss", ["a"])
    produced = {o: n for n in training.graph.node for o in n.output}
    (scatter,) = [n for n in training.graph.node if n.op_type == "ScatterElements"]
    assert [helper.get_attribute_value(a) for a in scatter.attribute if a.name == "reduction"] == [b"add"]
    scaled = produced[scatter.input[0]]
    assert scaled.op_type == "Mul" and produced[scaled.input[0]].op_type == "Exp"
    assert "Sub" not in [n.op_type for n in training.graph.node]


def half_model(node, x, extra_inputs, out_shape):
    """loss = ReduceSum(Cast(y, float) * r) of one float16 node y = node(x, ...)."""
    nodes = [
        node,
        helper.make_node("Cast", ["y"], ["y32"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["y32", "r"], ["t"]),
        helper.make_node("ReduceSum", ["t"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "half",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT16, x.shape),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, out_shape),
        ],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        extra_inputs,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def test_float16_sums_run_in_float32(rng):
    # float16 gradients sum in float32: GatherElements' scatter-add (which ONNX Runtime's CPU
    # takes in no float16) runs, and the mean loss's total weight over 3000 labels (past 2048 a
    # float16 sum of ones stops growing; ONNX Runtime's CPU sums them exactly anyway) is right.
    x = rng.standard_normal((3000, 4))
    labels = rng.integers(0, 4, 3000)
    weights = np.array([1.0, 0.5, 2.0, 1.5])
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "labels", "weights"], ["y"])
    inits = [initializer("labels", labels), numpy_helper.from_array(weights.astype(np.float16), "weights")]
    model = half_model(node, x, inits, [])
    r = np.array(1.0)
    _, grad = make_session(build_training_model(model, "loss", ["x"])).run(
        {"x": x.astype(np.float16), "r": r.astype(np.float32)}
    )
    _, expected = loss_oracle(SCE, x.astype(np.float16).astype(np.float64), labels, weights, None, "mean", r)
    assert grad.dtype == np.float16
    np.testing.assert_allclose(grad, expected, rtol=2e-2, atol=1e-6)

    indices = rng.integers(-4, 4, (50, 4))  # each element picked about 12 times
    node = helper.make_node("GatherElements", ["x", "indices"], ["y"], axis=1)
    model = half_model(node, x[:50], [initializer("indices", indices)], [50, 4])
    r = rng.standard_normal((50, 4))
    _, grad = make_session(build_training_model(model, "loss", ["x"])).run(
        {"x": x[:50].astype(np.float16), "r": r.astype(np.float32)}
    )
    expected = np.zeros((50, 4))
    np.add.at(expected, (np.arange(50)[:, None], indices % 4), r.astype(np.float16).astype(np.float64))
    assert grad.dtype == np.float16
    np.testing.assert_allclose(grad, expected, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("pads", [[1, 0, 2, 3], [-1, 2, 0, -2]], ids=["padded", "cropped"])
def test_pad_with_pads_known_at_run_time(pads, rng):
    # Pads fed as an input: the rule computes the slice (and the padding back) at run time.
    nodes = [
        helper.make_node("Pad", ["x", "pads"], ["y"]),
        helper.make_node("Mul", ["y", "y"], ["y2"]),
        helper.make_node("ReduceSum", ["y2"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "pad",
        [
            helper.make_tensor_value_info("x", F64, [3, 4]),
            helper.make_tensor_value_info("pads", TensorProto.INT64, [4]),
        ],
        [helper.make_tensor_value_info("loss", F64, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    feeds = {"x": rng.standard_normal((3, 4)), "pads": np.array(pads)}
    _, grad = make_session(build_training_model(model, "loss", ["x"])).run(feeds)
    np.testing.assert_allclose(
        grad, central_differences(make_session(model), feeds, "x"), rtol=1e-6, atol=1e-8
    )


@pytest.mark.parametrize(
    ("op", "shapes", "constants", "attrs", "message"),
    [
        ("Pad", {"a": (2, 3)}, {"pads": np.array([1, 0, 1, 0])}, {"mode": "reflect"}, "mode 'reflect'"),
        (
            "ScatterND",
            {"a": (4, 3), "b": (2, 3)},
            {"indices": np.array([[1], [3]])},
            {"reduction": "mul"},
            "reduction 'mul'",
        ),
        (
            "ScatterElements",
            {"a": (4, 3), "b": (1, 3)},
            {"indices": np.array([[1, 0, 3]])},
            {"reduction": "max"},
            "reduction 'max'",
        ),
        ("GatherND", {"a": (2, 3, 4)}, {"indices": np.array([[1], [0]])}, {"batch_dims": 1}, "batch_dims"),
        # SoftmaxCrossEntropyLoss is split into LogSoftmax and NLL first; the NLL keeps its name.
        (NLL, {"a": (3, 2), "weights": (2,)}, {"labels": np.array([0, 1, 1])}, {}, "class weights"),
        (SCE, {"a": (3, 2), "weights": (2,)}, {"labels": np.array([0, 1, 1])}, {}, "class weights"),
        ("Einsum", {"a": (3, 3)}, {}, {"equation": "ii->i"}, "equation 'ii->i'"),
        ("Einsum", {"a": (2, 3), "b": (3,)}, {}, {"equation": "...j,j->..."}, "broadcast"),
    ],
    ids=[
        "pad-reflect",
        "scatter-nd-mul",
        "scatter-elements-max",
        "gather-nd-batch-dims",
        "nll-weights",
        "sce-weights",
        "einsum-diagonal",
        "einsum-ellipsis",
    ],
)
def test_gradients_refused_name_the_node(op, shapes, constants, attrs, message, rng):
    inputs = {name: rng.uniform(0.5, 1.0, shape) for name, shape in shapes.items()}
    model = single_op_model(op, inputs, constants, attrs, 1, output_shapes(op, inputs, constants, attrs, 1))
    with pytest.raises(GradientError, match=f"{op.replace(SCE, NLL)} node 'y0'.*{message}"):
        build_training_model(model, "loss", list(inputs))


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


@pytest.mark.parametrize("op", ["Gather", "GatherND"])
def test_an_embedding_gradient_with_repeated_rows_is_exact_and_the_same_on_any_thread_count(op, rng):
    """Every lookup of a row adds to it: ONNX Runtime's ScatterND lost some of those additions on
    two threads (a Llama's embedding gradient 20% off, different run to run)."""
    rows, width, lookups = 64, 256, 4096
    ids_shape = [lookups] if op == "Gather" else [lookups, 1]
    nodes = [
        helper.make_node(op, ["table", "ids"], ["picked"]),
        helper.make_node("Mul", ["picked", "r"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted"], ["loss"], keepdims=0),
    ]
    f32 = TensorProto.FLOAT
    inputs = [
        helper.make_tensor_value_info("table", f32, [rows, width]),
        helper.make_tensor_value_info("ids", TensorProto.INT64, ids_shape),
        helper.make_tensor_value_info("r", f32, [lookups, width]),
    ]
    graph = helper.make_graph(nodes, "embedding", inputs, [helper.make_tensor_value_info("loss", f32, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    training = build_training_model(model, "loss", ["table"])
    feeds = {
        "table": rng.standard_normal((rows, width)).astype(np.float32),
        "ids": rng.integers(-rows, rows, ids_shape),
        "r": rng.standard_normal((lookups, width)).astype(np.float32),
    }
    expected = np.zeros((rows, width))
    np.add.at(expected, feeds["ids"].reshape(-1), feeds["r"].astype(np.float64))
    first = make_session(training, threads=1).run(feeds)[1]
    np.testing.assert_allclose(first, expected, rtol=1e-5, atol=1e-5)
    for _ in range(5):
        np.testing.assert_array_equal(make_session(training, threads=2).run(feeds)[1], first)


@pytest.mark.parametrize("x_shape", [(5, 4), (2, 5, 4)], ids=["rows", "batched"])
def test_a_linear_weight_gradient_is_one_matmul_with_no_transpose_after_it(x_shape, rng):
    """torch's Linear exports as x @ Transpose(W): dW is g^T @ x directly, not (x^T @ g)^T."""
    nodes = [
        helper.make_node("Transpose", ["w"], ["w_t"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "w_t"], ["y"]),
        helper.make_node("Mul", ["y", "r"], ["yr"]),
        helper.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0),
    ]
    inputs = [
        helper.make_tensor_value_info("x", F64, list(x_shape)),
        helper.make_tensor_value_info("w", F64, [3, 4]),
        helper.make_tensor_value_info("r", F64, [*x_shape[:-1], 3]),
    ]
    graph = helper.make_graph(nodes, "linear", inputs, [helper.make_tensor_value_info("loss", F64, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    training = build_training_model(model, "loss", ["w", "x"])
    produced = {o: n for n in training.graph.node for o in n.output}
    transposed_products = [
        n
        for n in training.graph.node
        if n.op_type == "Transpose" and produced.get(n.input[0], n).op_type == "MatMul"
    ]
    assert transposed_products == []
    feeds = {
        name: rng.standard_normal(shape)
        for name, shape in [("x", x_shape), ("w", (3, 4)), ("r", (*x_shape[:-1], 3))]
    }
    _, grad_w, grad_x = make_session(training).run(feeds)
    x, w, r = (feeds[n].reshape(-1, feeds[n].shape[-1]) for n in ("x", "w", "r"))
    np.testing.assert_allclose(grad_w, r.T @ x, rtol=1e-12)
    np.testing.assert_allclose(grad_x, (r @ feeds["w"]).reshape(x_shape), rtol=1e-12)


def test_op_without_rule_is_named():
    model = mlp_model(5)
    model.graph.node[2].op_type = "Acos"
    model.graph.node[2].name = "activation"
    with pytest.raises(GradientError, match="no gradient rule for ai.onnx::Acos \\(node 'activation'"):
        build_training_model(model, "loss", ["w1"])


def test_every_op_without_rule_is_named_in_one_error():
    model = mlp_model(5)
    for index, op_type in ((1, "Acosh"), (2, "Acos"), (4, "Acos")):
        model.graph.node[index].op_type = op_type
        model.graph.node[index].name = f"{op_type.lower()}_{index}"
    # One error, every op type once, with its first node.
    with pytest.raises(GradientError) as error:
        build_training_model(model, "loss", ["w1"])
    assert "ai.onnx::Acosh (node 'acosh_1'), ai.onnx::Acos (node 'acos_2')" in str(error.value)
    assert "acos_4" not in str(error.value)


def test_ops_with_a_function_body_are_differentiated_through_it(rng):
    # LayerNormalization has no rule; its schema's body is inlined and differentiated.
    feeds = {"x": rng.standard_normal((3, 5)), "s": rng.standard_normal(5), "b": rng.standard_normal(5)}
    nodes = [
        helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln"),
        helper.make_node("ReduceSumSquare", ["y"], ["loss"], keepdims=0),
    ]
    inputs = [helper.make_tensor_value_info(k, F64, v.shape) for k, v in feeds.items()]
    graph = helper.make_graph(nodes, "ln", inputs, [helper.make_tensor_value_info("loss", F64, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    training = build_training_model(model, "loss", ["x", "s"])
    assert "LayerNormalization" not in {n.op_type for n in training.graph.node}
    out = make_session(training).run(feeds)
    x = feeds["x"]
    xhat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    y = xhat * feeds["s"] + feeds["b"]
    dy = 2 * y
    g = dy * feeds["s"]
    dx = (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True)) / np.sqrt(
        x.var(-1, keepdims=True) + 1e-5
    )
    # The body normalizes in float32 (stash_type 1).
    np.testing.assert_allclose(out[1], dx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[2], (dy * xhat).sum(0), rtol=1e-5, atol=1e-6)


def test_ops_off_the_path_need_no_rule(rng):
    model = mlp_model(5)
    model.graph.node[2].op_type = "Acos"  # between w1 and the loss, not between w2 and it
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


def loss_model(nodes, inputs, initializers=(), elem=F64):
    """A model of ``nodes`` (ending in the scalar ``loss``) over graph inputs ``{name: shape}``."""
    graph = helper.make_graph(
        nodes,
        "loss",
        [helper.make_tensor_value_info(name, elem, shape) for name, shape in inputs.items()],
        [helper.make_tensor_value_info("loss", elem, [])],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16], ids=["float64", "float32", "float16"])
def test_a_padding_row_gets_nothing_from_its_lookups_and_the_rest_from_other_uses(dtype, rng):
    # A tied embedding (nn.Embedding(padding_idx=2) whose weight is also the lm_head) as
    # torch differentiates it: the lookup sends row 2 nothing, the lm_head's product sends it its
    # share. Ids hold the padding row, a negative id (row 5) and repeats.
    table, ids = rng.standard_normal((6, 4)), np.array([[2, 0, -1], [2, 2, 3]])
    h, r_lookup, r_head = (
        rng.standard_normal((2, 3, 4)),
        rng.standard_normal((2, 3, 4)),
        rng.standard_normal((2, 3, 6)),
    )
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [
        helper.make_node("Gather", ["w", "ids"], ["looked_up"]),
        helper.make_node("Mul", ["looked_up", "r_lookup"], ["t0"]),
        helper.make_node("Transpose", ["w"], ["w_t"]),
        helper.make_node("MatMul", ["h", "w_t"], ["logits"]),
        helper.make_node("Mul", ["logits", "r_head"], ["t1"]),
        helper.make_node("ReduceSum", ["t0"], ["t0_sum"], keepdims=0),
        helper.make_node("ReduceSum", ["t1"], ["t1_sum"], keepdims=0),
        helper.make_node("Add", ["t0_sum", "t1_sum"], ["loss"]),
    ]
    values = {"w": table, "h": h, "r_lookup": r_lookup, "r_head": r_head}
    shapes = {n: a.shape for n, a in values.items()}
    model = loss_model(nodes, shapes, [numpy_helper.from_array(ids, "ids")], elem)
    model.metadata_props.add(key="ort_ascend_ops.padding_rows", value='{"w": 2}')
    training = build_training_model(model, "loss", ["w"])
    _, grad = make_session(training).run({n: a.astype(dtype) for n, a in values.items()})

    lookups = np.zeros_like(table)
    for (b, s), row in np.ndenumerate(ids % 6):
        if row != 2:
            lookups[row] += r_lookup[b, s]
    expected = lookups + np.einsum("bsv,bsd->vd", r_head, h)
    tolerance = {np.float64: 1e-12, np.float32: 1e-6, np.float16: 2e-3}[dtype]
    assert np.linalg.norm(grad - expected) <= tolerance * np.linalg.norm(expected)
    # The padding row alone: the lm_head's share, which a whole-table error could hide.
    head_share = np.einsum("bsv,bsd->vd", r_head, h)[2]
    assert np.linalg.norm(grad[2] - head_share) <= tolerance * np.linalg.norm(head_share)


@pytest.mark.parametrize("ratio", [0.25, None], ids=["ratio", "default-ratio"])
def test_dropout_in_training_mode_drops_in_the_backward_what_the_forward_dropped(ratio, rng):
    # y = Dropout(x) * r summed: dx = r / (1 - ratio) where the forward kept x, 0 where it dropped
    # it, so loss == sum(x * dx) holds only with the forward's own mask.
    x, r = rng.standard_normal((64, 32)), rng.standard_normal((64, 32))
    constants = [numpy_helper.from_array(np.array(True), "training")]
    inputs = ["x", "", "training"]
    if ratio is not None:
        constants.append(numpy_helper.from_array(np.array(ratio), "ratio"))
        inputs[1] = "ratio"
    nodes = [
        helper.make_node("Dropout", inputs, ["y"], seed=3),
        helper.make_node("Mul", ["y", "r"], ["t"]),
        helper.make_node("ReduceSum", ["t"], ["loss"], keepdims=0),
    ]
    model = loss_model(nodes, {"x": (64, 32), "r": (64, 32)}, constants)
    loss, dx = make_session(build_training_model(model, "loss", ["x"])).run({"x": x, "r": r})
    scale = 1 / (1 - (0.5 if ratio is None else ratio))
    kept = dx != 0
    np.testing.assert_allclose(dx[kept], scale * r[kept], rtol=1e-15)
    assert 0.3 < kept.mean() < 0.95  # some dropped, some kept
    np.testing.assert_allclose(loss, np.sum(x * dx), rtol=1e-12)


def test_dropout_in_inference_mode_passes_the_gradient_through(rng):
    x, r = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    nodes = [
        helper.make_node("Dropout", ["x"], ["y"]),
        helper.make_node("Mul", ["y", "r"], ["t"]),
        helper.make_node("ReduceSum", ["t"], ["loss"], keepdims=0),
    ]
    model = loss_model(nodes, {"x": (3, 4), "r": (3, 4)})
    _, dx = make_session(build_training_model(model, "loss", ["x"])).run({"x": x, "r": r})
    np.testing.assert_array_equal(dx, r)


def test_a_one_element_parameter_is_not_folded_away(rng):
    # Softplus(a) of a one-element initializer a is computable from constants alone; a learned
    # scalar (xIELU's alpha) must still stay in the graph and get its gradient.
    x, r, a = rng.standard_normal(3), rng.standard_normal(3), np.array([0.3])
    nodes = [
        helper.make_node("Softplus", ["a"], ["s"]),
        helper.make_node("Mul", ["s", "x"], ["y"]),
        helper.make_node("Mul", ["y", "r"], ["t"]),
        helper.make_node("ReduceSum", ["t"], ["loss"], keepdims=0),
    ]
    model = loss_model(nodes, {"x": (3,), "r": (3,)}, [numpy_helper.from_array(a, "a")])
    for fuse in (True, False):
        training = build_training_model(model, "loss", ["a"], fuse=fuse)
        (_, grad) = session(training).run({"x": x, "r": r})
        np.testing.assert_allclose(grad, [np.sum(x * r) / (1 + np.exp(-a[0]))], rtol=1e-12)
