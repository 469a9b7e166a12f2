"""Shape rules of the LightningIndexer family."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..shapes import Dim, Shape, ShapeRule, attr, static

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
    layout = attr(attrs, "layout", str)
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
            static(label) and static(dim) and dim != label for label, dim in zip(labels, shape, strict=True)
        ):
            raise ValueError(f"layout {layout} needs {name} shaped {_dims_text(labels)}, got {shape}")
        for label, dim in zip(labels, shape, strict=True):
            if isinstance(label, int):
                continue
            if static(dim) and static(dims.get(label)) and dim != dims[label]:
                raise ValueError(
                    f"{name} has {label} = {dim} but {source[label]} has {label} = {dims[label]}"
                )
            if dims.get(label) is None or static(dim) and not static(dims[label]):
                dims[label], source[label] = dim, name
    if attrs.get("head_num") is not None:
        head_num = attr(attrs, "head_num", int)
        if head_num < 1:
            raise ValueError(f"head_num must be >= 1, got {head_num}")
        if static(dims.get("N1")) and dims["N1"] != head_num:
            raise ValueError(f"head_num = {head_num} but {source['N1']} has N1 = {dims['N1']}")
    return dims


def lightning_indexer_topk(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
    """`[B, S1, sparse_count]` (BSND) or `[T1, sparse_count]` (TND)"""
    k = attr(attrs, "sparse_count", int)
    if k < 1:
        raise ValueError(f"sparse_count must be >= 1, got {k}")
    dims = _lightning_dims(shapes, attrs)
    labels = _LIGHTNING_DIMS[attr(attrs, "layout", str)]["dy"][:-1]
    return [dims.get(label) for label in labels if isinstance(label, str)] + [k]


def lightning_indexer_grad(name: str) -> ShapeRule:
    """The rule for the gradient of input ``name``: its layout's shape, dims bound by any input."""

    def rule(shapes: Mapping[str, Shape], attrs: Mapping[str, object]) -> Shape:
        dims = _lightning_dims(shapes, attrs)
        labels = _LIGHTNING_DIMS[attr(attrs, "layout", str)][name]
        return [label if isinstance(label, int) else dims.get(label) for label in labels]

    bsnd, tnd = (_dims_text(_LIGHTNING_DIMS[layout][name]) for layout in ("BSND", "TND"))
    rule.__doc__ = f"same as `{name}`: `{bsnd}` (BSND) or `{tnd}` (TND)"
    return rule
