"""Standard ops left to onnxruntime-cann's own kernels (those ``aclnn_ops`` does not move), rewritten
around two faults of its kernels (onnxruntime 1.24, ``core/providers/cann``), which the emulated CANN
runtime catches and an NPU would hit as wrong numbers:

- ``math/binary_elementwise_ops.cc``: Add, Sub, Mul and Div broadcast an operand into a scratch
  buffer held by a ``unique_ptr`` scoped to the ``if`` that made it, so the buffer is freed before
  the kernel reads it: with both operands broadcast the second takes the first one's memory
  (``[1, 8, 1] * [4]`` gives ``b * b``). Here no operand of those ops is broadcast by the EP: each
  is expanded to the result's shape first, by an ``Expand``, which the EP has no kernel for and
  leaves to the CPU.
- ``tensor/reshape.cc``: a Reshape whose output cannot share its input's memory (a graph
  output) copies it with ``aclrtMemcpy``, which the vendor documents as copying at once, with no
  stream synchronization, while the input may still be computed on the stream. Not rewritten
  here: the gradient rules end no gradient in a Reshape (``Backward.rows_scattered``)."""

from __future__ import annotations

import onnx
from onnx import helper

from ..opschema import register_schemas

_BROADCASTING = frozenset({"Add", "Sub", "Mul", "Div"})


def _shapes(model: onnx.ModelProto) -> dict[str, tuple | None]:
    register_schemas()
    graph = onnx.shape_inference.infer_shapes(model).graph
    result = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        tensor = value.type.tensor_type
        dims = tuple(
            d.dim_param or (d.dim_value if d.HasField("dim_value") else None) for d in tensor.shape.dim
        )
        result[value.name] = dims if tensor.HasField("shape") and None not in dims else None
    result |= {i.name: tuple(i.dims) for i in graph.initializer}
    return result


def expand_broadcast_operands(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every operand of its Add, Sub, Mul and Div that the op would broadcast
    expanded to the result's shape first (see the module's doc); ``model`` itself when none is,
    or when type inference fails (ONNX Runtime then refuses the model, naming the error)."""
    try:
        shapes = _shapes(model)
    except onnx.shape_inference.InferenceError:
        return model
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    nodes, count = [], 0
    for node in rewritten.graph.node:
        if node.domain in ("", "ai.onnx") and node.op_type in _BROADCASTING:
            result = shapes.get(node.output[0])
            for i in (0, 1):
                if result is not None and shapes.get(node.input[i]) == result:
                    continue
                # Against the other operand as it is now: the first, once expanded, has the result's shape.
                count += 1
                shape = f"{node.input[i]}/cann_shape{count}"
                expanded = f"{node.input[i]}/cann_expanded{count}"
                nodes.append(helper.make_node("Shape", [node.input[1 - i]], [shape]))
                nodes.append(helper.make_node("Expand", [node.input[i], shape], [expanded]))
                node.input[i] = expanded
        nodes.append(node)
    if not count:
        return model
    del rewritten.graph.node[:]
    rewritten.graph.node.extend(nodes)
    return rewritten
