"""The operator reference in Markdown (docs/OPS.md), rendered from the specs."""

from __future__ import annotations

from .shape_rules import SHAPE_RULES
from .specs import Attribute, OpSpec, Param, specs


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows] + [""]


def _shape_doc(p: Param) -> str:
    kind, target = p.shape_source
    return f"same as `{target}`" if kind == "same" else SHAPE_RULES[target].__doc__ or ""


def _op_markdown(spec: OpSpec) -> list[str]:
    def name(p: Param) -> str:
        needs = f", needs `{p.requires}`" if p.requires else ""
        return f"`{p.name}`" + (f" (optional{needs})" if p.optional else "")

    def choices(a: Attribute) -> str:
        return f" One of {', '.join(f'`{c!r}`' for c in a.choices)}." if a.choices else ""

    lines = [f"## {spec.name}", "", f"Domain `{spec.domain}`, since version {spec.since_version}.", ""]
    lines += [spec.doc.strip(), "", "### Inputs", ""]
    lines += _table(
        ("Name", "Type", "Description"), [(name(p), f"`{p.type}`", p.description) for p in spec.inputs]
    )
    lines += ["### Outputs", ""]
    lines += _table(
        ("Name", "Type", "Shape", "Description"),
        [(name(p), f"`{p.type}`", _shape_doc(p), p.description) for p in spec.outputs],
    )
    if spec.attributes:
        lines += ["### Attributes", ""]
        lines += _table(
            ("Name", "Type", "Default", "Description"),
            [
                (
                    f"`{a.name}`",
                    a.type,
                    "required" if a.required else "none" if a.default is None else f"`{a.default!r}`",
                    a.description + choices(a),
                )
                for a in spec.attributes
            ],
        )
    if spec.type_constraints:
        lines += ["### Type constraints", ""]
        lines += _table(
            ("Name", "Allowed types", "Description"),
            [
                (f"`{c.name}`", ", ".join(f"`{t}`" for t in c.types), c.description)
                for c in spec.type_constraints
            ],
        )
    combos = spec.allowed_type_combinations
    if combos:
        lines += ["Allowed type combinations (any other is rejected by shape inference):", ""]
        lines += _table(
            tuple(f"`{t}`" for t in combos.params), [tuple(f"`{t}`" for t in row) for row in combos.types]
        )
    if spec.same_shape:
        groups = "; ".join(", ".join(f"`{name}`" for name in group) for group in spec.same_shape)
        lines += [f"Inputs that must have one shape (checked by shape inference): {groups}.", ""]
    return lines


def docs_markdown() -> str:
    """Operator reference in Markdown, rendered from the specs."""
    lines = [
        "# ort_ascend_ops operators",
        "",
        "Generated from `schemas/*.toml` by `ort_ascend_ops.opschema.docs_markdown()`; do not edit.",
        "",
    ]
    for spec in sorted(specs().values(), key=lambda s: s.name):
        lines += _op_markdown(spec)
    return "\n".join(lines).rstrip() + "\n"
