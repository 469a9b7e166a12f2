"""The specs as ONNX ``OpSchema``s, registered in ``onnx.defs`` so that the checker and shape
inference know the ops."""

from __future__ import annotations

import threading
from collections.abc import Callable

import onnx
from onnx import AttributeProto, helper
from onnx.defs import OpSchema
from onnx.shape_inference import InferenceError

from .inference import infer_outputs
from .shapes import Shape
from .specs import ATTR_TYPES, Attribute, OpSpec, Param, specs


def _from_type_proto(tp: onnx.TypeProto | None) -> tuple[int | None, Shape]:
    if tp is None or not tp.HasField("tensor_type"):
        return None, None
    tt = tp.tensor_type
    if not tt.HasField("shape"):
        return tt.elem_type or None, None
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param or None for d in tt.shape.dim]
    return tt.elem_type or None, dims


def _attr_value(proto: AttributeProto) -> object:
    value = helper.get_attribute_value(proto)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode(errors="replace") for v in value]
    return value


def attribute_values(node: onnx.NodeProto) -> dict[str, object]:
    """The node's attributes by name, as Python values (strings decoded)."""
    return {a.name: _attr_value(a) for a in node.attribute}


def _inference_function(spec: OpSpec) -> Callable[[onnx.shape_inference.InferenceContext], None]:
    def infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        inputs = {
            p.name: _from_type_proto(ctx.get_input_type(i))
            for i, p in enumerate(spec.inputs)
            if i < ctx.get_num_inputs() and ctx.has_input(i)
        }
        protos = {a.name: ctx.get_attribute(a.name) for a in spec.attributes}
        attrs = {name: _attr_value(p) for name, p in protos.items() if p is not None}
        produced = {
            i: p.name for i, p in enumerate(spec.outputs) if i < ctx.get_num_outputs() and ctx.has_output(i)
        }
        try:
            outputs = infer_outputs(spec, inputs, attrs, produced.values())
        except ValueError as e:
            raise InferenceError(str(e)) from e
        for i, name in produced.items():
            elem, shape = outputs[name]
            if elem is not None:
                ctx.set_output_type(i, helper.make_tensor_type_proto(elem, shape))

    return infer


def _formal(p: Param) -> OpSchema.FormalParameter:
    option = OpSchema.FormalParameterOption.Optional if p.optional else OpSchema.FormalParameterOption.Single
    return OpSchema.FormalParameter(p.name, p.type, p.description, param_option=option)


def _onnx_attribute(a: Attribute) -> OpSchema.Attribute:
    if a.default is not None:
        return OpSchema.Attribute(a.name, a.to_proto(a.default), a.description)
    return OpSchema.Attribute(a.name, ATTR_TYPES[a.type].schema, a.description, required=a.required)


def to_onnx_schema(spec: OpSpec) -> OpSchema:
    schema = OpSchema(
        spec.name,
        spec.domain,
        spec.since_version,
        spec.doc,
        inputs=[_formal(p) for p in spec.inputs],
        outputs=[_formal(p) for p in spec.outputs],
        type_constraints=[(c.name, list(c.types), c.description) for c in spec.type_constraints],
        attributes=[_onnx_attribute(a) for a in spec.attributes],
    )
    schema.set_type_and_shape_inference_function(_inference_function(spec))
    return schema


_REGISTERING = threading.Lock()


def register_schemas() -> None:
    """Register every op's ONNX schema; ops already registered are left alone. Safe from any
    thread (``make_session`` calls it for bfloat16 models): ONNX refuses a second registration."""
    with _REGISTERING:
        for spec in specs().values():
            if not onnx.defs.has(spec.name, spec.since_version, spec.domain):
                onnx.defs.register_schema(to_onnx_schema(spec))
