"""A required input or output that a node leaves empty ("") is an ORT error, never a crash: ORT's
lite custom-op API crashed on exactly this, which is why every op reads its slots itself."""

import pytest
from onnx import TensorProto, helper

from ort_ascend_ops import function_protos, make_session
from ort_ascend_ops.opschema import load_op_specs

SLOTS = [
    (spec.name, kind, i)
    for spec in load_op_specs().values()
    for kind, params in (("input", spec.inputs), ("output", spec.outputs))
    for i, param in enumerate(params)
    if not param.optional
]


@pytest.mark.parametrize("op, kind, index", SLOTS, ids=lambda v: str(v))
def test_empty_required_slot_is_an_ort_error(op, kind, index):
    spec = load_op_specs()[op]
    # Every slot up to the last required one, the optional ones empty (""): an optional input may
    # sit before a required one (FlashAttentionScoreGrad's atten_mask).
    last = max(i for i, p in enumerate(spec.inputs) if not p.optional)
    inputs = ["" if p.optional else p.name for p in spec.inputs[: last + 1]]
    outputs = [p.name for p in spec.outputs]
    (inputs if kind == "input" else outputs)[index] = ""
    attrs = {"head_num": 2} if op == "LightningIndexerGrad" else {}
    node = helper.make_node(op, inputs, outputs, domain=spec.domain, **attrs)
    graph = helper.make_graph(
        [node],
        op,
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in inputs if name],
        [
            helper.make_tensor_value_info(
                name, TensorProto.INT32 if p.type == "tensor(int32)" else TensorProto.FLOAT, None
            )
            for name, p in zip(outputs, spec.outputs, strict=True)
            if name
        ],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 23), helper.make_opsetid(spec.domain, 1)], ir_version=10
    )
    model.functions.extend(function_protos())
    with pytest.raises(Exception, match=op):
        make_session(model)  # refused when the session is built
