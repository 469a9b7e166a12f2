"""Shape rules of the RotaryPositionEmbedding family."""

from __future__ import annotations

from collections.abc import Mapping

from ..shapes import Shape, attr, static


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
            static(t) and static(s) and t != s and (t != 1 or axis == last)
            for axis, (t, s) in enumerate(zip(table, shape, strict=True))
        ):
            raise ValueError(
                f"cos/sin shape {table} does not broadcast to {data} shape {shape} "
                f"(the last axis is never broadcast)"
            )
    dims = [d for d in (s[-1] for s in (shape, table) if s) if static(d)]
    mode = attr(attrs, "mode", int)
    multiple = 4 if mode == 2 else 2
    if dims and dims[0] % multiple:
        raise ValueError(f"mode {mode} needs a last dim that is a multiple of {multiple}, got {dims[0]}")
    return shape


def rotary_y(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """same as `x`; `cos` broadcasts to it, the last dim suits `mode`"""
    return _rotary("x", shapes, attrs)


def rotary_dx(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """same as `dy`; `cos` broadcasts to it, the last dim suits `mode`"""
    return _rotary("dy", shapes, attrs)
