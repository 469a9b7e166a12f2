"""Op specifications read from ``schemas/*.toml``: the TOML files are the single source for the
ONNX schema registration (types, attributes, shape inference), the attribute defaults every layer
uses, and the generated operator documentation."""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from onnx import AttributeProto, TensorProto, helper
from onnx.defs import OpSchema

from ..domain import DOMAIN, VERSION
from .shape_rules import SHAPE_RULES

# An installed wheel ships the TOML files inside the package; a source checkout keeps them at
# the repository root.
_SCHEMA_DIRS = (Path(__file__).parents[1] / "schemas", Path(__file__).parents[3] / "schemas")

ELEM_TYPES = {f"tensor({name.lower()})": value for name, value in TensorProto.DataType.items()}
ELEM_NAMES = {value: name for name, value in ELEM_TYPES.items()}


def elem_type(type_name: str) -> int:
    """The ``TensorProto`` element type of a schema type such as ``tensor(float)``."""
    return ELEM_TYPES[type_name]


@dataclass(frozen=True)
class _AttrType:
    proto: int  # AttributeProto.AttributeType
    schema: OpSchema.AttrType
    python: type  # the type helper.get_attribute_value gives
    coerce: Callable[[Any], object]  # a TOML value to that type


ATTR_TYPES = {
    "int": _AttrType(AttributeProto.INT, OpSchema.AttrType.INT, int, int),
    "float": _AttrType(AttributeProto.FLOAT, OpSchema.AttrType.FLOAT, float, float),
    "string": _AttrType(AttributeProto.STRING, OpSchema.AttrType.STRING, str, str),
    "ints": _AttrType(AttributeProto.INTS, OpSchema.AttrType.INTS, list, lambda v: [int(e) for e in v]),
    "floats": _AttrType(
        AttributeProto.FLOATS, OpSchema.AttrType.FLOATS, list, lambda v: [float(e) for e in v]
    ),
    "strings": _AttrType(
        AttributeProto.STRINGS, OpSchema.AttrType.STRINGS, list, lambda v: [str(e) for e in v]
    ),
}


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

    @property
    def shape_source(self) -> tuple[str, str]:
        """An output's ``shape`` as (kind, target): ("same", input name) or ("rule", rule name)."""
        kind, _, target = (self.shape or "").partition(":")
        return kind, target


@dataclass(frozen=True)
class Attribute:
    name: str
    type: str
    description: str = ""
    default: object = None
    required: bool = False
    choices: Sequence[object] = ()  # the only values allowed, if not empty

    def coerce(self, value: object) -> object:
        return ATTR_TYPES[self.type].coerce(value)

    def to_proto(self, value: object) -> AttributeProto:
        return helper.make_attribute(self.name, self.coerce(value), attr_type=ATTR_TYPES[self.type].proto)


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


def spec_from_toml(data: Mapping[str, Any]) -> OpSpec:
    """The spec one TOML file describes, validated."""
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
        if p.type not in params and p.type not in ELEM_TYPES:
            raise ValueError(f"{spec.name}.{p.name}: unknown type {p.type!r}")
    input_names = {p.name for p in spec.inputs}
    optional_inputs = {p.name for p in spec.inputs if p.optional}
    for p in spec.outputs:
        kind, target = p.shape_source
        if not (kind == "same" and target in input_names or kind == "rule" and target in SHAPE_RULES):
            raise ValueError(f"{spec.name}.{p.name}: bad shape {p.shape!r}")
        if p.requires is not None and not (p.optional and p.requires in optional_inputs):
            raise ValueError(f"{spec.name}.{p.name}: only an optional output requires an optional input")
    for a in spec.attributes:
        if a.type not in ATTR_TYPES:
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
def specs() -> dict[str, OpSpec]:
    """The library's op specs by op name (shared: do not modify)."""
    folder = next(d for d in _SCHEMA_DIRS if d.is_dir())
    specs: dict[str, OpSpec] = {}
    for path in sorted(folder.glob("*.toml")):
        with path.open("rb") as f:
            spec = spec_from_toml(tomllib.load(f))
        # One domain and version for every layer: the Python package's, which the native
        # library's are generated from.
        if (spec.domain, spec.since_version) != (DOMAIN, VERSION):
            raise ValueError(
                f"{path.name}: domain {spec.domain!r} version {spec.since_version}, "
                f"but ort_ascend_ops.domain says {DOMAIN!r} version {VERSION}"
            )
        specs[spec.name] = spec
    return specs


def load_op_specs() -> dict[str, OpSpec]:
    """All op specs, keyed by op name."""
    return dict(specs())


_T = TypeVar("_T")


def _attribute(op_name: str, attribute: str) -> Attribute:
    (a,) = (a for a in specs()[op_name].attributes if a.name == attribute)
    return a


def default(op_name: str, attribute: str, kind: type[_T]) -> _T:
    """The default of ``op_name``'s ``attribute`` in its spec, as ``kind``; the one place every
    layer takes it from (the reference functions' signatures, the gradient rules)."""
    a = _attribute(op_name, attribute)
    value = None if a.default is None else a.coerce(a.default)
    if not isinstance(value, kind):
        raise TypeError(f"{op_name}.{attribute} has no default of type {kind.__name__}")
    return value


def choices(op_name: str, attribute: str) -> list:
    """The only values ``op_name``'s ``attribute`` may take, as its spec lists them; with
    ``choice_rule``, the one place the reference functions take them from (the native glue's are
    generated from the same TOML)."""
    a = _attribute(op_name, attribute)
    if not a.choices:
        raise ValueError(f"{op_name}.{attribute} lists no choices")
    return [a.coerce(c) for c in a.choices]


def choice_rule(op_name: str, attribute: str) -> str:
    """The contract's rule on the attribute's choices, as the checks name it: "attribute
    'sparse_mode' must be 0 or 3"."""
    spelled = [repr(c) for c in choices(op_name, attribute)]
    allowed = spelled[0] if len(spelled) == 1 else ", ".join(spelled[:-1]) + " or " + spelled[-1]
    return f"attribute '{attribute}' must be {allowed}"
