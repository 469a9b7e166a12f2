"""Shape rules of the GroupedMatmul family."""

from __future__ import annotations

from collections.abc import Mapping

from ..shapes import Shape, attr


def grouped_matmul_y(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """`[M, N]`: x's rows, the weight's output columns."""
    x, weight = shapes.get("x"), shapes.get("weight")
    if x is None or weight is None:
        return None
    if len(x) != 2 or len(weight) != 3:
        raise ValueError(f"x must have rank 2 and weight rank 3; they have {len(x)} and {len(weight)}")
    return [x[0], weight[1] if attr(attrs, "transpose_weight", int) else weight[2]]


def grouped_matmul_dweight(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """`[E, K, N]` (`[E, N, K]` with transpose_weight): the experts, x's and dy's columns."""
    x, dy, groups = shapes.get("x"), shapes.get("dy"), shapes.get("group_list")
    if x is None or dy is None or groups is None:
        return None
    if len(x) != 2 or len(dy) != 2 or len(groups) != 1:
        raise ValueError("x and dy must have rank 2 and group_list rank 1")
    k, n = x[1], dy[1]
    return [groups[0], n, k] if attr(attrs, "transpose_weight", int) else [groups[0], k, n]
