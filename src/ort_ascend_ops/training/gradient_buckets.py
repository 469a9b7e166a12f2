"""Data parallel's all-reduce inside the training graph, so that it overlaps the backward: the
gradients cut into buckets in the order the backward makes them (DDP's buckets: a small first one,
then at most ``bucket_bytes`` each, one element type each), and each bucket's gradients passed
through one ``HcclAllReduce`` node (native/aclnn/standard/collective.cc) whose outputs are the
training model's gradient outputs. ONNX Runtime runs a bucket's node as soon as its gradients exist;
the node queues the all-reduce on the communicator's stream and returns, and the backward's later
nodes run while the bucket travels (as DDP's autograd hooks launch a bucket's all-reduce).

The node is in ``ACLNN_DOMAIN`` with a function that is the reduction over a group of one
(Identity), so the model stays a valid ONNX model anywhere."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from ..domain import ACLNN_DOMAIN

ALL_REDUCE = "HcclAllReduce"
# DDP's first bucket (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES): the last layers' gradients
# leave early instead of waiting for a full bucket.
FIRST_BUCKET_BYTES = 1 << 20


def buckets(
    model: onnx.ModelProto, gradients: Mapping[str, tuple[int, int]], bucket_bytes: int
) -> list[list[str]]:
    """The gradient outputs ``gradients`` (name -> (element type, bytes)) in buckets, in the order
    they can be made (the fewest nodes needed first: the last layers' before the first's), the
    first of at most ``FIRST_BUCKET_BYTES``, the others of at most ``bucket_bytes`` (a gradient
    larger than that alone), one element type each."""
    needed = _needed_nodes(model.graph)
    made = sorted(gradients, key=lambda name: (needed.get(name, 0), name))
    cut: list[list[str]] = []
    size, cap = 0, min(FIRST_BUCKET_BYTES, bucket_bytes)
    for name in made:
        element, nbytes = gradients[name]
        if cut and gradients[cut[-1][0]][0] == element and size + nbytes <= cap:
            cut[-1].append(name)
            size += nbytes
            continue
        if cut:
            cap = bucket_bytes
        cut.append([name])
        size = nbytes
    return cut


def _needed_nodes(graph: onnx.GraphProto) -> dict[str, int]:
    """For every value a node makes, how many nodes must run to make it (itself included): each
    node's ancestors as a bit set over the nodes, in the graph's topological order."""
    made_by: dict[str, int] = {}
    ancestors: list[int] = []
    for index, node in enumerate(graph.node):
        bits = 1 << index
        for name in node.input:
            if name in made_by:
                bits |= ancestors[made_by[name]]
        ancestors.append(bits)
        for name in node.output:
            made_by[name] = index
    return {name: ancestors[index].bit_count() for name, index in made_by.items()}


def _function(arity: int) -> onnx.FunctionProto:
    inputs = [f"g{i}" for i in range(arity)]
    outputs = [f"r{i}" for i in range(arity)]
    function = helper.make_function(
        ACLNN_DOMAIN,
        ALL_REDUCE,
        inputs,
        outputs,
        [helper.make_node("Identity", [i], [o]) for i, o in zip(inputs, outputs, strict=True)],
        [helper.make_opsetid("", 18)],
        ["group"],
    )
    function.overload = f"n{arity}"
    return function


def with_all_reduce(model: onnx.ModelProto, bucketed: Sequence[Sequence[str]], group: str) -> onnx.ModelProto:
    """``model`` with each bucket of gradient outputs summed over the ranks of HCCL communicator
    ``group`` by one ``HcclAllReduce`` node."""
    reduced = onnx.ModelProto()
    reduced.CopyFrom(model)
    graph = reduced.graph
    local = {name: f"{name}/local" for bucket in bucketed for name in bucket}
    for node in graph.node:
        for i, name in enumerate(node.input):
            node.input[i] = local.get(name, name)
        for i, name in enumerate(node.output):
            node.output[i] = local.get(name, name)
    arities = set()
    # ONNX Runtime's default execution order is a depth-first walk back from the graph's leaves,
    # the last leaf in the node list first, each leaf run once everything it needs has: the
    # buckets' nodes (leaves) go last, the first bucket last of all, so that each bucket's
    # all-reduce runs as soon as its gradients exist and before the backward's later layers.
    for number, bucket in reversed(list(enumerate(bucketed))):
        node = helper.make_node(
            ALL_REDUCE,
            [local[n] for n in bucket],
            list(bucket),
            name=f"all_reduce_bucket{number}",
            domain=ACLNN_DOMAIN,
            group=group,
        )
        node.overload = f"n{len(bucket)}"
        arities.add(len(bucket))
        graph.node.append(node)
    reduced.functions.extend(_function(k) for k in sorted(arities))
    if all(o.domain != ACLNN_DOMAIN for o in reduced.opset_import):
        reduced.opset_import.append(helper.make_opsetid(ACLNN_DOMAIN, 1))
    reduced.ir_version = max(reduced.ir_version, 10)  # overloads
    return reduced


def gradient_sizes(model: onnx.ModelProto, names: Sequence[str], shapes: Mapping[str, Sequence[int]]):
    """name -> (element type, bytes) of gradient outputs ``names`` of ``model``, from ``shapes``."""
    types = {o.name: o.type.tensor_type.elem_type for o in model.graph.output}
    return {
        n: (
            types[n],
            int(np.prod(shapes[n], dtype=np.int64)) * helper.tensor_dtype_to_np_dtype(types[n]).itemsize,
        )
        for n in names
    }
