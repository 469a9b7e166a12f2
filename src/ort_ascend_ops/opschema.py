"""Op specifications read from ``schemas/*.toml``.

The TOML files are the single source for the ONNX schema registration (types, attributes,
shape inference) and for the generated operator documentation.
"""

from __future__ import annotations

import functools
import threading
import tomllib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx import AttributeProto, TensorProto, helper
from onnx.defs import OpSchema
from onnx.shape_inference import InferenceError

# An installed wheel ships the TOML files inside the package; a source checkout keeps them at
# the repository root.
_SCHEMA_DIRS = (Path(__file__).parent / "schemas", Path(__file__).parents[2] / "schemas")

Dim = int | str | None  # static size, symbolic name, or unknown
Shape = list[Dim] | None  # None: rank unknown
ShapeRule = Callable[[Mapping[str, Shape], Mapping[str, object]], Shape]

_ELEM_TYPES = {f"tensor({name.lower()})": value for name, value in TensorProto.DataType.items()}
_ELEM_NAMES = {value: name for name, value in _ELEM_TYPES.items()}


def elem_type(type_name: str) -> int:
    """The ``TensorProto`` element type of a schema type such as ``tensor(float)``."""
    return _ELEM_TYPES[type_name]


_ATTR_TYPES = {  # name: (AttributeProto type, coercion to the Python type helper.get_attribute_value gives)
    "int": (AttributeProto.INT, int),
    "float": (AttributeProto.FLOAT, float),
    "string": (AttributeProto.STRING, str),
    "ints": (AttributeProto.INTS, lambda v: [int(e) for e in v]),
    "floats": (AttributeProto.FLOATS, lambda v: [float(e) for e in v]),
    "strings": (AttributeProto.STRINGS, lambda v: [str(e) for e in v]),
}
_PYTHON_TYPES = {"int": int, "float": float, "string": str, "ints": list, "floats": list, "strings": list}


@dataclass(frozen=True)
class Param:
    """An input or output. Outputs only: ``shape`` is ``same:<input>`` or ``rule:<name>``;
    ``requires`` names an optional input without which the (optional) output cannot be produced."""

    name: str
    type: str
    description: str = ""
    optional: bool = False
    shape: str | None = None
    requires: str | None = None


@dataclass(frozen=True)
class Attribute:
    name: str
    type: str
    description: str = ""
    default: object = None
    required: bool = False
    choices: Sequence[object] = ()  # the only values allowed, if not empty

    def coerce(self, value: object) -> object:
        return _ATTR_TYPES[self.type][1](value)

    def to_proto(self, value: object) -> AttributeProto:
        return helper.make_attribute(self.name, self.coerce(value), attr_type=_ATTR_TYPES[self.type][0])


@dataclass(frozen=True)
class TypeConstraint:
    name: str
    types: tuple[str, ...]
    description: str = ""


@dataclass(frozen=True)
class TypeCombinations:
    """The only allowed joint bindings of several type parameters."""

    params: tuple[str, ...]
    types: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class OpSpec:
    name: str
    domain: str
    since_version: int
    doc: str
    inputs: tuple[Param, ...]
    outputs: tuple[Param, ...]
    attributes: tuple[Attribute, ...] = ()
    type_constraints: tuple[TypeConstraint, ...] = ()
    allowed_type_combinations: TypeCombinations | None = None
    same_shape: tuple[tuple[str, ...], ...] = ()  # groups of inputs that must share one shape


def _rms_norm_rstd(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """`x.shape[:n] + [1] * rank(gamma)`, `n = rank(x) - rank(gamma)`."""
    x, gamma = shapes.get("x"), shapes.get("gamma")
    if x is None or gamma is None:
        return None
    if not 1 <= len(gamma) <= len(x):
        raise ValueError(f"need 1 <= rank(gamma) <= rank(x), got shapes {gamma} and {x}")
    n = len(x) - len(gamma)
    if any(isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(x[n:], gamma, strict=True)):
        raise ValueError(f"gamma shape {gamma} does not match the trailing axes of x shape {x}")
    return x[:n] + [1] * len(gamma)


def _static(dim: Dim) -> bool:
    return isinstance(dim, int)


def _rotary(data: str, shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """``shapes[data]``, once cos (or sin) is checked to broadcast to it and its last dim to suit
    the mode."""
    shape = shapes[data]
    table = shapes["cos"] if shapes["cos"] is not None else shapes["sin"]
    if shape is not None and len(shape) == 0:
        raise ValueError(f"{data} must have rank >= 1")
    if shape is not None and table is not None:
        if len(table) != len(shape):
            raise ValueError(f"cos/sin have rank {len(table)} but {data} has rank {len(shape)}")
        last = len(shape) - 1
        if any(
            _static(t) and _static(s) and t != s and (t != 1 or axis == last)
            for axis, (t, s) in enumerate(zip(table, shape, strict=True))
        ):
            raise ValueError(
                f"cos/sin shape {table} does not broadcast to {data} shape {shape} "
                f"(the last axis is never broadcast)"
            )
    dims = [s[-1] for s in (shape, table) if s and _static(s[-1])]
    multiple = 4 if attrs["mode"] == 2 else 2
    if dims and dims[0] % multiple:
        raise ValueError(
            f"mode {attrs['mode']} needs a last dim that is a multiple of {multiple}, got {dims[0]}"
        )
    return shape


def _rotary_y(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """same as `x`; `cos` broadcasts to it, the last dim suits `mode`"""
    return _rotary("x", shapes, attrs)


def _rotary_dx(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """same as `dy`; `cos` broadcasts to it, the last dim suits `mode`"""
    return _rotary("dy", shapes, attrs)


# The named dims of each LightningIndexer(Grad) tensor, by layout; 1 is a fixed size (N2).
_LIGHTNING_DIMS: dict[str, dict[str, tuple[str | int, ...]]] = {
    "BSND": {
        "query": ("B", "S1", "N1", "D"),
        "key": ("B", "S2", 1, "D"),
        "weights": ("B", "S1", "N1"),
        "dy": ("B", "S1", "K"),
        "sparse_indices": ("B", "S1", "K"),
    },
    "TND": {
        "query": ("T1", "N1", "D"),
        "key": ("T2", 1, "D"),
        "weights": ("T1", "N1"),
        "dy": ("T1", "K"),
        "sparse_indices": ("T1", "K"),
        "actual_seq_lengths_query": ("B",),
        "actual_seq_lengths_key": ("B",),
    },
}
_SEQ_LENGTHS = ("actual_seq_lengths_query", "actual_seq_lengths_key")


def _dims_text(dims: Sequence[str | int]) -> str:
    return f"[{', '.join(map(str, dims))}]"


def _lightning_dims(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> dict[str, Dim]:
    """The layout's named dims, each bound to a static size where an input gives one (else a
    symbolic name); raises where the present inputs contradict the layout or each other."""
    layout = attrs["layout"]
    given = [name for name in _SEQ_LENGTHS if name in shapes]
    if layout == "TND" and len(given) < 2:
        raise ValueError(f"layout TND needs both {' and '.join(_SEQ_LENGTHS)}")
    if layout == "BSND" and given:
        raise ValueError(f"layout BSND takes no {given[0]}")
    dims: dict[str, Dim] = {}
    source: dict[str, str] = {}
    for name, labels in _LIGHTNING_DIMS[layout].items():
        shape = shapes.get(name)
        if shape is None:
            continue
        if len(shape) != len(labels) or any(
            _static(label) and _static(dim) and dim != label for label, dim in zip(labels, shape, strict=True)
        ):
            raise ValueError(f"layout {layout} needs {name} shaped {_dims_text(labels)}, got {shape}")
        for label, dim in zip(labels, shape, strict=True):
            if _static(label):
                continue
            if _static(dim) and _static(dims.get(label)) and dim != dims[label]:
                raise ValueError(
                    f"{name} has {label} = {dim} but {source[label]} has {label} = {dims[label]}"
                )
            if dims.get(label) is None or _static(dim) and not _static(dims[label]):
                dims[label], source[label] = dim, name
    head_num = attrs.get("head_num")
    if head_num is not None:
        if head_num < 1:
            raise ValueError(f"head_num must be >= 1, got {head_num}")
        if _static(dims.get("N1")) and dims["N1"] != head_num:
            raise ValueError(f"head_num = {head_num} but {source['N1']} has N1 = {dims['N1']}")
    return dims


def _lightning_indexer_topk(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """`[B, S1, sparse_count]` (BSND) or `[T1, sparse_count]` (TND)"""
    k = attrs["sparse_count"]
    if k < 1:
        raise ValueError(f"sparse_count must be >= 1, got {k}")
    dims = _lightning_dims(shapes, attrs)
    return [dims.get(label) for label in _LIGHTNING_DIMS[attrs["layout"]]["dy"][:-1]] + [k]


def _lightning_indexer_grad(name: str) -> ShapeRule:
    """The rule for the gradient of input ``name``: its layout's shape, dims bound by any input."""

    def rule(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
        dims = _lightning_dims(shapes, attrs)
        labels = _LIGHTNING_DIMS[attrs["layout"]][name]
        return [label if _static(label) else dims.get(label) for label in labels]

    bsnd, tnd = (_dims_text(_LIGHTNING_DIMS[layout][name]) for layout in ("BSND", "TND"))
    rule.__doc__ = f"same as `{name}`: `{bsnd}` (BSND) or `{tnd}` (TND)"
    return rule


# Named shape rules that TOML outputs refer to as ``shape = "rule:<name>"``.
SHAPE_RULES: dict[str, ShapeRule] = {
    "rms_norm_rstd": _rms_norm_rstd,
    "rotary_y": _rotary_y,
    "rotary_dx": _rotary_dx,
    "lightning_indexer_topk": _lightning_indexer_topk,
    "lightning_indexer_grad_query": _lightning_indexer_grad("query"),
    "lightning_indexer_grad_key": _lightning_indexer_grad("key"),
    "lightning_indexer_grad_weights": _lightning_indexer_grad("weights"),
}


def _spec_from_toml(data: dict) -> OpSpec:
    data = dict(data)
    combos = data.pop("allowed_type_combinations", None)
    spec = OpSpec(
        inputs=tuple(Param(**p) for p in data.pop("inputs")),
        outputs=tuple(Param(**p) for p in data.pop("outputs")),
        attributes=tuple(Attribute(**a) for a in data.pop("attributes", ())),
        type_constraints=tuple(
            TypeConstraint(c["name"], tuple(c["types"]), c.get("description", ""))
            for c in data.pop("type_constraints", ())
        ),
        allowed_type_combinations=combos
        and TypeCombinations(tuple(combos["params"]), tuple(map(tuple, combos["types"]))),
        same_shape=tuple(map(tuple, data.pop("same_shape", ()))),
        **data,
    )
    _validate(spec)
    return spec


def _validate(spec: OpSpec) -> None:
    params = {c.name for c in spec.type_constraints}
    for p in spec.inputs + spec.outputs:
        if p.type not in params and p.type not in _ELEM_TYPES:
            raise ValueError(f"{spec.name}.{p.name}: unknown type {p.type!r}")
    input_names = {p.name for p in spec.inputs}
    optional_inputs = {p.name for p in spec.inputs if p.optional}
    for p in spec.outputs:
        kind, _, target = (p.shape or "").partition(":")
        if not (kind == "same" and target in input_names or kind == "rule" and target in SHAPE_RULES):
            raise ValueError(f"{spec.name}.{p.name}: bad shape {p.shape!r}")
        if p.requires is not None and not (p.optional and p.requires in optional_inputs):
            raise ValueError(f"{spec.name}.{p.name}: only an optional output requires an optional input")
    for a in spec.attributes:
        if a.type not in _ATTR_TYPES:
            raise ValueError(f"{spec.name}.{a.name}: unknown attribute type {a.type!r}")
        if a.required and a.default is not None:
            raise ValueError(f"{spec.name}.{a.name}: a required attribute takes no default")
        if a.choices and a.default is not None and a.default not in a.choices:
            raise ValueError(f"{spec.name}.{a.name}: default {a.default!r} is not one of the choices")
    if not all(set(group) <= input_names for group in spec.same_shape):
        raise ValueError(f"{spec.name}: same_shape names unknown inputs")
    combos = spec.allowed_type_combinations
    if combos and not set(combos.params) <= params:
        raise ValueError(f"{spec.name}: allowed_type_combinations names unknown parameters")


@functools.cache
def _specs() -> dict[str, OpSpec]:
    folder = next(d for d in _SCHEMA_DIRS if d.is_dir())
    specs = {}
    for path in sorted(folder.glob("*.toml")):
        with path.open("rb") as f:
            spec = _spec_from_toml(tomllib.load(f))
        specs[spec.name] = spec
    return specs


def load_op_specs() -> dict[str, OpSpec]:
    """All op specs, keyed by op name."""
    return dict(_specs())


def _same_shape(a: Shape, b: Shape) -> bool:
    """False only where the shapes certainly differ."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and not any(
        _static(x) and _static(y) and x != y for x, y in zip(a, b, strict=True)
    )


def bind_types(
    spec: OpSpec, elem_types: Mapping[str, int | None], combinations: bool = True
) -> dict[str, int]:
    """The type parameters bound by the present inputs' element types (input name -> type, None
    where unknown). Raises ValueError for a type, or (unless ``combinations`` is false) a
    combination of types, the spec does not allow, naming the input."""
    constraints = {c.name: c for c in spec.type_constraints}
    bound: dict[str, int] = {}
    binder: dict[str, str] = {}
    for p in spec.inputs:
        elem = elem_types.get(p.name)
        if elem is None:
            continue
        allowed = constraints[p.type].types if p.type in constraints else (p.type,)
        if _ELEM_NAMES.get(elem) not in allowed:
            raise ValueError(
                f"{spec.name}: {p.name} has type {_ELEM_NAMES.get(elem, elem)}, not one of {allowed}"
            )
        if p.type not in constraints:
            continue
        if bound.setdefault(p.type, elem) != elem:
            raise ValueError(
                f"{spec.name}: {p.name} has type {_ELEM_NAMES[elem]}, but {p.type} is already bound to "
                f"{_ELEM_NAMES[bound[p.type]]} by {binder[p.type]}"
            )
        binder.setdefault(p.type, p.name)
    combos = spec.allowed_type_combinations
    if combinations and combos and all(t in bound for t in combos.params):
        got = tuple(_ELEM_NAMES[bound[t]] for t in combos.params)
        if got not in combos.types:
            raise ValueError(
                f"{spec.name}: ({', '.join(combos.params)}) = ({', '.join(got)}) "
                f"is not an allowed type combination (the types of {', '.join(binder[t] for t in combos.params)})"
            )
    return bound


def infer_outputs(
    spec: OpSpec,
    inputs: Mapping[str, tuple[int | None, Shape]],
    attrs: Mapping[str, object],
    outputs: Collection[str] | None = None,
) -> dict[str, tuple[int | None, Shape]]:
    """Element type and shape of the produced outputs, from the present inputs' (elem_type, shape).

    Absent optional inputs are left out of ``inputs``; unknown element types are None.
    ``outputs`` names the outputs the node produces; by default every output whose required
    input is present. Raises ValueError for a type, shape, attribute value or output the spec
    does not allow.
    """
    constraints = {c.name: c for c in spec.type_constraints}
    bound = bind_types(spec, {name: elem for name, (elem, _) in inputs.items()})
    for a in spec.attributes:
        if a.name in attrs and type(attrs[a.name]) is not _PYTHON_TYPES[a.type]:
            raise ValueError(f"{spec.name}: attribute '{a.name}' must be of type {a.type}")
    missing = [a.name for a in spec.attributes if a.required and a.name not in attrs]
    if missing:
        raise ValueError(f"{spec.name}: missing required attributes {missing}")
    attrs = {a.name: a.default for a in spec.attributes if a.default is not None} | dict(attrs)
    for a in spec.attributes:
        if a.choices and a.name in attrs and attrs[a.name] not in a.choices:
            raise ValueError(f"{spec.name}: {a.name} = {attrs[a.name]!r} is not one of {list(a.choices)}")
    shapes = {name: shape for name, (_, shape) in inputs.items()}
    for group in spec.same_shape:
        present = [name for name in group if name in shapes]
        for name in present[1:]:
            if not _same_shape(shapes[present[0]], shapes[name]):
                raise ValueError(
                    f"{spec.name}: {name} has shape {shapes[name]} but {present[0]} has shape "
                    f"{shapes[present[0]]}; they must be equal"
                )
    if outputs is None:
        outputs = [p.name for p in spec.outputs if p.requires is None or p.requires in inputs]
    for p in spec.outputs:
        if p.name in outputs and p.requires is not None and p.requires not in inputs:
            raise ValueError(f"{spec.name}: output {p.name} needs input {p.requires}")

    result = {}
    for p in (p for p in spec.outputs if p.name in outputs):
        kind, _, target = p.shape.partition(":")
        try:
            shape = shapes.get(target) if kind == "same" else SHAPE_RULES[target](shapes, attrs)
        except ValueError as e:
            raise ValueError(f"{spec.name}: {e}") from None
        elem = bound.get(p.type) if p.type in constraints else _ELEM_TYPES[p.type]
        result[p.name] = (elem, None if shape is None else list(shape))
    return result


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
    def infer(ctx) -> None:
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
    attr_type = OpSchema.AttrType(_ATTR_TYPES[a.type][0])
    return OpSchema.Attribute(a.name, attr_type, a.description, required=a.required)


def _to_onnx_schema(spec: OpSpec) -> OpSchema:
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
        for spec in _specs().values():
            if not onnx.defs.has(spec.name, spec.since_version, spec.domain):
                onnx.defs.register_schema(_to_onnx_schema(spec))


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows] + [""]


def _shape_doc(shape: str) -> str:
    kind, _, target = shape.partition(":")
    return f"same as `{target}`" if kind == "same" else SHAPE_RULES[target].__doc__


def _op_markdown(spec: OpSpec) -> list[str]:
    def name(p: Param) -> str:
        needs = f", needs `{p.requires}`" if p.requires else ""
        return f"`{p.name}`" + (f" (optional{needs})" if p.optional else "")

    def choices(a: Attribute) -> str:
        return f" One of {', '.join(f'`{c!r}`' for c in a.choices)}." if a.choices else ""

    lines = [f"## {spec.name}", "", f"Domain `{spec.domain}`, since version {spec.since_version}.", ""]
    lines += [spec.doc.strip(), "", "### Inputs", ""]
    lines += _table(
        ("Name", "Type", "Description"), [(name(p), f"`{p.type}`", p.description) for p in spec.inputs]
    )
    lines += ["### Outputs", ""]
    lines += _table(
        ("Name", "Type", "Shape", "Description"),
        [(name(p), f"`{p.type}`", _shape_doc(p.shape), p.description) for p in spec.outputs],
    )
    if spec.attributes:
        lines += ["### Attributes", ""]
        lines += _table(
            ("Name", "Type", "Default", "Description"),
            [
                (
                    f"`{a.name}`",
                    a.type,
                    "required" if a.required else "none" if a.default is None else f"`{a.default!r}`",
                    a.description + choices(a),
                )
                for a in spec.attributes
            ],
        )
    if spec.type_constraints:
        lines += ["### Type constraints", ""]
        lines += _table(
            ("Name", "Allowed types", "Description"),
            [
                (f"`{c.name}`", ", ".join(f"`{t}`" for t in c.types), c.description)
                for c in spec.type_constraints
            ],
        )
    combos = spec.allowed_type_combinations
    if combos:
        lines += ["Allowed type combinations (any other is rejected by shape inference):", ""]
        lines += _table(
            tuple(f"`{t}`" for t in combos.params), [tuple(f"`{t}`" for t in row) for row in combos.types]
        )
    if spec.same_shape:
        groups = "; ".join(", ".join(f"`{name}`" for name in group) for group in spec.same_shape)
        lines += [f"Inputs that must have one shape (checked by shape inference): {groups}.", ""]
    return lines


def docs_markdown() -> str:
    """Operator reference in Markdown, rendered from the specs."""
    lines = [
        "# ort_ascend_ops operators",
        "",
        "Generated from `schemas/*.toml` by `ort_ascend_ops.opschema.docs_markdown()`; do not edit.",
        "",
    ]
    for spec in sorted(_specs().values(), key=lambda s: s.name):
        lines += _op_markdown(spec)
    return "\n".join(lines).rstrip() + "\n"
