"""Type and shape inference from the specs: what a node of an op produces, given what its present
inputs are; shared by the ONNX schemas, the model builder and the reference functions."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .shape_rules import SHAPE_RULES
from .shapes import Shape, same_shape
from .specs import ATTR_TYPES, ELEM_NAMES, ELEM_TYPES, OpSpec


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
        if ELEM_NAMES.get(elem) not in allowed:
            raise ValueError(
                f"{spec.name}: {p.name} has type {ELEM_NAMES.get(elem, elem)}, not one of {allowed}"
            )
        if p.type not in constraints:
            continue
        if bound.setdefault(p.type, elem) != elem:
            raise ValueError(
                f"{spec.name}: {p.name} has type {ELEM_NAMES[elem]}, but {p.type} is already bound to "
                f"{ELEM_NAMES[bound[p.type]]} by {binder[p.type]}"
            )
        binder.setdefault(p.type, p.name)
    combos = spec.allowed_type_combinations
    if combinations and combos and all(t in bound for t in combos.params):
        got = tuple(ELEM_NAMES[bound[t]] for t in combos.params)
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
        if a.name in attrs and type(attrs[a.name]) is not ATTR_TYPES[a.type].python:
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
            if not same_shape(shapes[present[0]], shapes[name]):
                raise ValueError(
                    f"{spec.name}: {name} has shape {shapes[name]} but {present[0]} has shape "
                    f"{shapes[present[0]]}; they must be equal"
                )
    if outputs is None:
        outputs = [p.name for p in spec.outputs if p.requires is None or p.requires in inputs]
    for p in spec.outputs:
        if p.name in outputs and p.requires is not None and p.requires not in inputs:
            raise ValueError(f"{spec.name}: output {p.name} needs input {p.requires}")

    result: dict[str, tuple[int | None, Shape]] = {}
    for p in (p for p in spec.outputs if p.name in outputs):
        kind, target = p.shape_source
        try:
            shape = shapes.get(target) if kind == "same" else SHAPE_RULES[target](shapes, attrs)
        except ValueError as e:
            raise ValueError(f"{spec.name}: {e}") from None
        elem = bound.get(p.type) if p.type in constraints else ELEM_TYPES[p.type]
        result[p.name] = (elem, None if shape is None else list(shape))
    return result
