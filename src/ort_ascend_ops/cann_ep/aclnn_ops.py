"""ONNX's standard ops on the NPU: each node of one of them becomes the same op in
``ACLNN_DOMAIN``, whose kernel in the native library calls the vendor's aclnn function for it on the
device (native/aclnn/standard, one row per op), and whose function is the standard op itself: where
no kernel matches a node (an element type the NPU lacks), ONNX Runtime runs the function, and the
rewritten model stays a valid ONNX model anywhere."""

from __future__ import annotations

import onnx
from onnx import helper

from ..domain import ACLNN_DOMAIN

# The ops native/aclnn/standard's table has rows for (tests/test_aclnn_standard_ops.py holds the
# two to each other).
STANDARD_OPS = frozenset(
    {
        # elementwise.cc
        *("Add", "Sub", "Mul", "Div", "Pow", "Sum", "Max", "Min"),
        *("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not"),
        *("Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Sigmoid", "Tanh", "Sin", "Cos"),
        *("Relu", "Erf", "Floor", "Ceil", "Gelu", "IsNaN", "Mod", "Where", "Cast"),
        # layout.cc
        *("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Transpose", "Expand"),
        *("Concat", "Slice", "Split", "Pad", "Tile", "Trilu", "Range", "ConstantOfShape", "Shape"),
        # matmul.cc
        *("MatMul", "Gemm"),
        # softmax.cc
        *("Softmax", "LogSoftmax", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"),
        # reduce.cc
        *("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceProd"),
        *("CumSum", "ArgMax", "TopK"),
        # index.cc
        *("Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND"),
    }
)
# ONNX versions of the ops whose semantics the kernels follow (opsets the training graphs use).
OPSETS = range(18, 24)


def _movable(node: onnx.NodeProto) -> bool:
    """Whether the NPU's kernel can take the node. ONNX Runtime types a custom op's outputs by
    its inputs' types, and its shape inference cannot read a tensor attribute (C API 21): the
    NPU's ConstantOfShape fills float32 alone, the type of an absent ``value``."""
    if node.op_type == "ConstantOfShape":
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        return value is None or value.data_type == onnx.TensorProto.FLOAT
    return True


def _standard_opset(model: onnx.ModelProto) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def _function(node: onnx.NodeProto, attributes: list[str], overload: str, opset: int) -> onnx.FunctionProto:
    inputs = [f"i{k}" if name else "" for k, name in enumerate(node.input)]
    outputs = [f"o{k}" if name else "" for k, name in enumerate(node.output)]
    body = helper.make_node(node.op_type, inputs, outputs)
    for name in attributes:
        reference = onnx.AttributeProto(name=name, ref_attr_name=name)
        reference.type = next(a.type for a in node.attribute if a.name == name)
        body.attribute.append(reference)
    function = helper.make_function(
        ACLNN_DOMAIN,
        node.op_type,
        [i for i in inputs if i],
        [o for o in outputs if o],
        [body],
        [helper.make_opsetid("", opset)],
        attributes,
    )
    function.overload = overload
    return function


def to_aclnn_domain(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every node of a ``STANDARD_OPS`` op in its main graph moved to
    ``ACLNN_DOMAIN``, each with a function that is the standard op (one per op, arity and set
    of attributes: ONNX functions have no variadic inputs, so each arity is an overload);
    ``model`` itself when its ONNX opset is outside ``OPSETS`` or nothing moves. A model this
    already rewrote may come again: its functions are reused, and only nodes added since move."""
    opset = _standard_opset(model)
    if opset is None or opset not in OPSETS:
        return model
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    # Functions an earlier pass added stay as they are (a second pass moves only what came after it:
    # the casts ``widen_bfloat16`` inserts, say); ONNX refuses a function defined twice.
    moved = 0
    existing = {f"{f.name}/{f.overload}" for f in rewritten.functions if f.domain == ACLNN_DOMAIN}
    functions: dict[str, onnx.FunctionProto] = {}
    for node in rewritten.graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in STANDARD_OPS or not _movable(node):
            continue
        attributes = sorted(a.name for a in node.attribute)
        slots = (
            "".join("i" if name else "_" for name in node.input)
            + "-"
            + "".join("o" if name else "_" for name in node.output)
        )
        overload = f"{slots}-{'-'.join(attributes)}"
        key = f"{node.op_type}/{overload}"
        if key not in functions and key not in existing:
            functions[key] = _function(node, attributes, overload, opset)
        node.domain = ACLNN_DOMAIN
        node.overload = overload
        moved += 1
    if not moved:
        return model
    rewritten.functions.extend(functions.values())
    if all(o.domain != ACLNN_DOMAIN for o in rewritten.opset_import):
        rewritten.opset_import.append(helper.make_opsetid(ACLNN_DOMAIN, 1))
    rewritten.ir_version = max(rewritten.ir_version, 10)  # overloads
    return rewritten
