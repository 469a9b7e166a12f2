"""Shape rules of the FlashAttentionScore family."""

from __future__ import annotations

from collections.abc import Mapping

from ..shapes import Dim, Shape, attr, static

# Where B, S and the head axes sit in query/key/value, by layout (H: heads and dims merged).
_AXES: dict[str, tuple[str, ...]] = {
    "BSND": ("B", "S", "N", "D"),
    "BNSD": ("B", "N", "S", "D"),
    "BSH": ("B", "S", "H"),
    "SBH": ("S", "B", "H"),
    "TND": ("S", "N", "D"),
}


def _split(shape: list[Dim], axes: tuple[str, ...]) -> dict[str, Dim]:
    return dict(zip(axes, shape, strict=True))


def _check_present(shapes: Mapping[str, Shape], layout: str) -> None:
    """The optional inputs the layout needs or refuses (``shapes`` holds the present inputs), in the
    native kernel's words: known from the node alone, so a node breaking them is refused whole."""
    for name in ("actual_seq_lengths_query", "actual_seq_lengths_kv"):
        if layout != "TND" and name in shapes:
            raise ValueError(f"input_layout {layout} takes no input '{name}' (TND only)")
        if layout == "TND" and name not in shapes:
            raise ValueError(f"input_layout TND needs input '{name}'")
    if layout == "TND" and "atten_mask" in shapes:
        raise ValueError("input_layout TND takes no input 'atten_mask' (the lengths bound each batch)")


def _check(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> tuple[str, dict[str, Dim], int]:
    """The layout, query's named dims, and head_num; raises where static dims break a rule."""
    layout = attr(attrs, "input_layout", str)
    head_num = attr(attrs, "head_num", int)
    if head_num < 1:
        raise ValueError(f"head_num must be >= 1, got {head_num}")
    _check_present(shapes, layout)
    axes = _AXES[layout]
    dims: dict[str, dict[str, Dim]] = {}
    for name in ("query", "key", "value"):
        shape = shapes.get(name)
        if shape is None:
            continue
        if len(shape) != len(axes):
            raise ValueError(f"input_layout {layout} needs {name} of rank {len(axes)}, got {shape}")
        dims[name] = _split(shape, axes)
    q, k, v = (dims.get(n, {}) for n in ("query", "key", "value"))
    for (a, da), (b, db), label in (
        (("query", q), ("key", k), "B"),
        (("key", k), ("value", v), "B"),
        (("key", k), ("value", v), "S"),
    ):
        x, y = da.get(label), db.get(label)
        if static(x) and static(y) and x != y:
            raise ValueError(f"{a} has {label} = {x} but {b} has {label} = {y}")
    if "N" in axes:
        n1, n2, nv = q.get("N"), k.get("N"), v.get("N")
        if static(n1) and n1 != head_num:
            raise ValueError(f"head_num = {head_num} but query has {n1} heads")
        if static(n2) and (n2 == 0 or head_num % n2):
            raise ValueError(f"key's {n2} heads do not divide head_num = {head_num}")
        if static(n2) and static(nv) and n2 != nv:
            raise ValueError(f"key has {n2} heads but value has {nv}")
        dq, dk = q.get("D"), k.get("D")
        if static(dq) and static(dk) and dq != dk:
            raise ValueError(f"query has D = {dq} but key has D = {dk}")
    else:
        h1, h2 = q.get("H"), k.get("H")
        if static(h1) and h1 % head_num:
            raise ValueError(f"query's H = {h1} is not a multiple of head_num = {head_num}")
        if static(h1) and static(h2) and h1:
            d = h1 // head_num
            if h2 % d or head_num % max(h2 // d, 1) or h2 == 0:
                raise ValueError(f"key's H = {h2} is not N2 * D with N2 dividing head_num (D = {d})")
    return layout, q, head_num


def flash_attention_out(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """query's shape with value's head dim Dv (BSH/SBH: `N1 * Dv`)"""
    layout, q, head_num = _check(shapes, attrs)
    query, key, value = shapes.get("query"), shapes.get("key"), shapes.get("value")
    if query is None:
        return None
    out = list(query)
    if "N" in _AXES[layout]:
        out[-1] = value[-1] if value is not None else None
        return out
    # BSH/SBH: Dv = Hv / N2 with N2 = H2 / D, so N1 * Dv = Hv * H1 / H2.
    h1, h2, hv = query[-1], key[-1] if key else None, value[-1] if value else None
    out[-1] = hv * h1 // h2 if static(h1) and static(h2) and static(hv) and h2 else (h1 if h1 == hv else None)
    return out


def flash_attention_stats(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """`[B, N1, S1, 8]`, or `[T1, N1, 8]` in TND"""
    layout, q, head_num = _check(shapes, attrs)
    if layout == "TND":
        return [q.get("S"), head_num, 8]
    return [q.get("B"), head_num, q.get("S"), 8]


def _checked_shape_of(name: str):
    def rule(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
        _check(shapes, attrs)
        return shapes.get(name)

    rule.__doc__ = f"{name}'s shape"
    return rule


# The gradients have their inputs' shapes; the rules run for the layout's checks.
flash_attention_dq = _checked_shape_of("query")
flash_attention_dk = _checked_shape_of("key")
flash_attention_dv = _checked_shape_of("value")
