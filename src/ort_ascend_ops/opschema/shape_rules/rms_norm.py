"""Shape rules of the RmsNorm family."""

from __future__ import annotations

from collections.abc import Mapping

from ..shapes import Shape, static


def rms_norm_rstd(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """`x.shape[:n] + [1] * rank(gamma)`, `n = rank(x) - rank(gamma)`."""
    x, gamma = shapes.get("x"), shapes.get("gamma")
    if x is None or gamma is None:
        return None
    if not 1 <= len(gamma) <= len(x):
        raise ValueError(f"need 1 <= rank(gamma) <= rank(x), got shapes {gamma} and {x}")
    n = len(x) - len(gamma)
    if any(static(a) and static(b) and a != b for a, b in zip(x[n:], gamma, strict=True)):
        raise ValueError(f"gamma shape {gamma} does not match the trailing axes of x shape {x}")
    return x[:n] + [1] * len(gamma)
