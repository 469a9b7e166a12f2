"""Shape rules of the SwiGlu family."""

from __future__ import annotations

from collections.abc import Mapping

from ..shapes import Shape, attr, static


def swi_glu_y(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """x's shape with `x.shape[dim]` halved."""
    x = shapes.get("x")
    if x is None:
        return None
    dim = attr(attrs, "dim", int)
    if not -len(x) <= dim < len(x):
        raise ValueError(f"dim {dim} is out of range for x of rank {len(x)}")
    axis = dim % len(x)
    extent = x[axis]
    if static(extent) and extent % 2:
        raise ValueError(f"x.shape[{dim}] = {extent} is odd; SwiGlu cuts it in two equal halves")
    half = extent // 2 if static(extent) else None
    return [*x[:axis], half, *x[axis + 1 :]]
