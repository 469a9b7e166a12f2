"""The shape vocabulary of the specs' shape inference: dims, shapes and the rules that compute an
output's shape from the present inputs' shapes and the node's attributes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeGuard, TypeVar

Dim = int | str | None  # static size, symbolic name, or unknown
Shape = list[Dim] | None  # None: rank unknown
# (input shapes by name, attributes by name with the spec's defaults filled in) -> output shape.
ShapeRule = Callable[[Mapping[str, Shape], Mapping[str, object]], Shape]

_T = TypeVar("_T")


def static(dim: object) -> TypeGuard[int]:
    """Whether ``dim`` is a static size."""
    return isinstance(dim, int)


def attr(attrs: Mapping[str, object], name: str, kind: type[_T]) -> _T:
    """Attribute ``name`` as ``kind``: ``infer_outputs`` has checked each attribute's type
    against the spec before a rule runs, so a mismatch here is a bug in a spec or a rule."""
    value = attrs[name]
    if not isinstance(value, kind):
        raise TypeError(f"attribute {name!r} is {type(value).__name__}, not {kind.__name__}")
    return value


def same_shape(a: Shape, b: Shape) -> bool:
    """False only where the shapes certainly differ."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and not any(static(x) and static(y) and x != y for x, y in zip(a, b, strict=True))
