"""``gradient_buckets``: data parallel's in-graph all-reduce. The buckets follow the order the
backward can make the gradients (DDP's: a small first bucket, then ``bucket_bytes``, one element type
each), and the graph with the buckets' ``HcclAllReduce`` nodes is a valid ONNX model whose function
(a reduction over a group of one) gives the original model's outputs, on ONNX Runtime's CPU."""

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from ort_ascend_ops.training.gradient_buckets import (
    ALL_REDUCE,
    FIRST_BUCKET_BYTES,
    buckets,
    gradient_sizes,
    with_all_reduce,
)

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16


def _chain(layers: int) -> onnx.ModelProto:
    """x -> layer 0 -> ... -> loss, and a 'gradient' per layer made from the values after it, as a
    backward makes the last layer's first: g<i> needs the chain up to layer layers-1, then back."""
    nodes, back = [], "x"
    for i in range(layers):
        nodes.append(helper.make_node("Mul", [back, f"w{i}"], [f"h{i}"]))
        back = f"h{i}"
    for i in reversed(range(layers)):
        nodes.append(helper.make_node("Add", [back, f"w{i}"], [f"b{i}"]))
        nodes.append(helper.make_node("Identity", [f"b{i}"], [f"g{i}"]))
        back = f"b{i}"
    shape = [4]
    inputs = [helper.make_tensor_value_info("x", F32, shape)]
    inputs += [helper.make_tensor_value_info(f"w{i}", F32, shape) for i in range(layers)]
    outputs = [helper.make_tensor_value_info(f"g{i}", F32, shape) for i in range(layers)]
    graph = helper.make_graph(nodes, "chain", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def test_buckets_follow_the_order_the_backward_makes_the_gradients():
    model = _chain(5)
    sizes = {f"g{i}": (F32, 16) for i in range(5)}
    assert buckets(model, sizes, 32) == [["g4", "g3"], ["g2", "g1"], ["g0"]]


def test_the_first_bucket_is_small_and_each_bucket_holds_one_element_type():
    model = _chain(4)
    mb = 1 << 20
    sizes = {"g3": (F32, mb // 2), "g2": (F32, mb), "g1": (F16, mb), "g0": (F16, mb)}
    assert FIRST_BUCKET_BYTES == mb
    assert buckets(model, sizes, 25 * mb) == [["g3"], ["g2"], ["g1", "g0"]]
    assert buckets(model, {"g3": (F32, 3 * mb), "g2": (F32, 1)}, mb) == [["g3"], ["g2"]]


def test_the_reduced_model_is_valid_onnx_and_its_function_is_the_identity():
    model = _chain(3)
    sizes = gradient_sizes(model, ["g0", "g1", "g2"], dict.fromkeys(["g0", "g1", "g2"], [4]))
    assert sizes == dict.fromkeys(["g0", "g1", "g2"], (F32, 16))
    reduced = with_all_reduce(model, buckets(model, sizes, 32), "dp1")
    onnx.checker.check_model(reduced, full_check=True)
    nodes = [n for n in reduced.graph.node if n.op_type == ALL_REDUCE]
    assert [list(n.output) for n in nodes] == [["g0"], ["g2", "g1"]]  # the first bucket last
    assert all(helper.get_attribute_value(n.attribute[0]) == b"dp1" for n in nodes)
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal(4).astype(np.float32) for i in model.graph.input}
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = ort.InferenceSession(reduced.SerializeToString()).run(None, feeds)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)
