"""Single-node models of the ort_ascend_ops operators, for tests and benchmarks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from .domain import DOMAIN, VERSION
from .opschema import Dim, Shape, infer_outputs, load_op_specs
from .reference.portable import DEFAULT_ONNX_OPSET, attach_functions

IR_VERSION = 10  # accepted by both onnx 1.23 and ONNX Runtime 1.32


def _elem_type(dtype: int | np.dtype | type) -> int:
    return dtype if isinstance(dtype, int) else helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _shape(shape: Sequence[Dim] | None) -> list[Dim] | None:
    return None if shape is None else list(shape)


def make_op_model(
    op_name: str,
    input_types: Mapping[str, tuple[int | np.dtype | type, Sequence[Dim] | None]],
    attrs: Mapping[str, object] | None = None,
    with_functions: bool = True,
    output_cast_float: bool = False,
    outputs: Sequence[str] | None = None,
    opset: int = DEFAULT_ONNX_OPSET,
) -> onnx.ModelProto:
    """Build a model holding one ``ort_ascend_ops`` node of type ``op_name``.

    Args:
        op_name: an op of ``load_op_specs()``, e.g. ``"RmsNorm"``.
        input_types: input name -> (element type, shape). The element type is an
            ``onnx.TensorProto`` data type or a NumPy dtype (``ml_dtypes.bfloat16`` works);
            each dim is an int, a symbolic name (str) or None, and a shape of None means
            unknown rank. Graph inputs carry the op's input names; an optional input left out
            is passed to the node as absent.
        attrs: node attributes, coerced to the types the spec declares; omitted ones keep
            their defaults.
        with_functions: attach the onnxscript reference FunctionProtos the node needs
            (``attach_functions``) so that runtimes without the native kernels (ONNX Runtime
            inlines them, ``onnx.reference``) can run the model.
        opset: the model's default-domain opset (18 or newer).
        output_cast_float: append ``Cast(to=FLOAT)`` to every non-float32 output, e.g.
            because ONNX Runtime cannot hand bfloat16 back to NumPy.
        outputs: the outputs the node produces; by default every output the given inputs
            allow.

    Graph outputs carry the op's output names, with element types and shapes from the
    spec's shape inference. The node lists every input and output slot, with ``""`` for the
    absent ones: ``onnx.reference`` runs a function only for a node that lists all of its
    inputs, and ONNX Runtime's type inference fails for a function node that lists fewer
    outputs than the function has. Raises ValueError for types or shapes the spec rejects.
    """
    spec = load_op_specs()[op_name]
    by_name = {a.name: a for a in spec.attributes}
    attrs = {
        name: by_name[name].coerce(value) if name in by_name else value
        for name, value in (attrs or {}).items()
    }
    unknown = (
        (set(input_types) - {p.name for p in spec.inputs})
        | (set(attrs) - set(by_name))
        | (set(outputs or ()) - {p.name for p in spec.outputs})
    )
    if unknown:
        raise ValueError(f"{op_name} has no inputs, attributes or outputs named {sorted(unknown)}")
    inputs: dict[str, tuple[int, Shape]] = {
        p.name: (_elem_type(input_types[p.name][0]), _shape(input_types[p.name][1]))
        for p in spec.inputs
        if p.name in input_types
    }
    produced: dict[str, tuple[int, Shape]] = {}
    for name, (elem, shape) in infer_outputs(spec, inputs, attrs, outputs).items():
        if elem is None:  # a type parameter that no input binds: no spec has one
            raise ValueError(f"{op_name}: no input binds the element type of {name}")
        produced[name] = (elem, shape)

    cast = {name for name, (elem, _) in produced.items() if output_cast_float and elem != TensorProto.FLOAT}
    node = helper.make_node(
        op_name,
        [p.name if p.name in inputs else "" for p in spec.inputs],
        [
            f"{op_name}_{p.name}" if p.name in cast else p.name if p.name in produced else ""
            for p in spec.outputs
        ],
        domain=spec.domain,
    )
    node.attribute.extend(by_name[name].to_proto(value) for name, value in attrs.items())
    casts = [helper.make_node("Cast", [f"{op_name}_{name}"], [name], to=TensorProto.FLOAT) for name in cast]

    graph = helper.make_graph(
        [node, *casts],
        op_name,
        [helper.make_tensor_value_info(name, elem, shape) for name, (elem, shape) in inputs.items()],
        [
            helper.make_tensor_value_info(name, TensorProto.FLOAT if name in cast else elem, shape)
            for name, (elem, shape) in produced.items()
        ],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, VERSION)],
        ir_version=IR_VERSION,
    )
    return attach_functions(model) if with_functions else model
