"""What the rules read off matched values: constants, and dims known equal at fuse time."""

from __future__ import annotations

import onnx_ir as ir

from ..opschema import bind_types, load_op_specs

# A mask value at or below this excludes its key: no score climbs over it (float16's lowest finite
# value; transformers adds its dtype's lowest, the exporter -inf or its dtype's lowest).
EXCLUDED = -65504.0


def produced_by(value: ir.Value | None, *types: str) -> ir.Node | None:
    """The value's producer when it is a default-domain node of one of ``types``."""
    node = None if value is None else value.producer()
    return node if node is not None and node.domain == "" and node.op_type in types else None


def constant_list(value: ir.Value | None) -> list | None:
    """The constant's elements as a flat list, or None when it is not a constant."""
    if value is None or value.const_value is None:
        return None
    return value.const_value.numpy().reshape(-1).tolist()


def scalar(value: ir.Value | None) -> float | int | None:
    """The value of a one-element constant, else None."""
    items = constant_list(value)
    return items[0] if items is not None and len(items) == 1 else None


def same_dim(a, b) -> bool:
    """Dims known equal now: equal ints, or the same named symbol (an unnamed one matches nothing)."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a is not None and b is not None and a.value is not None and a.value == b.value


def dims(value: ir.Value | None) -> list | None:
    """The value's dims (int, or SymbolicDim) when its rank is known."""
    if value is None or value.shape is None:
        return None
    return list(value.shape)


def known_rank(value: ir.Value) -> int:
    """The rank of a value whose rank a rule's check has found known."""
    shape = dims(value)
    if shape is None:
        raise ValueError(f"{value.name}: rank unknown")
    return len(shape)


def is_last_axis(axes: list | None, rank: int) -> bool:
    return axes is not None and len(axes) == 1 and axes[0] in (-1, rank - 1)


def elem_type(value: ir.Value) -> ir.DataType | None:
    """The value's element type, read off a producing Cast when shape inference left it out."""
    if value.dtype is not None:
        return value.dtype
    node = value.producer()
    if node is not None and node.op_type == "Cast" and node.domain == "":
        return ir.DataType(node.attributes.get_int("to"))
    return None


def allows_types(op: str, **inputs: ir.Value) -> bool:
    """Whether the op's schema (types and type combinations) takes these inputs' element types."""
    types = {name: elem_type(v) for name, v in inputs.items()}
    known = {name: t.value for name, t in types.items() if t is not None}
    if len(known) < len(types):
        return False
    try:
        bind_types(load_op_specs()[op], known)
    except ValueError:
        return False
    return True


def computed_from(value: ir.Value, domain: str, op_type: str) -> bool:
    """Whether a node of ``op_type`` in ``domain`` is among the producers ``value`` is computed from."""
    frontier, seen = [value], set()
    while frontier:
        node = frontier.pop().producer()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if node.domain == domain and node.op_type == op_type:
            return True
        frontier.extend(v for v in node.inputs if v is not None)
    return False
