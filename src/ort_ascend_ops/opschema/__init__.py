"""Op specifications from ``schemas/*.toml`` and what is derived from them: ``specs`` loads and
validates them, ``shape_rules`` holds the per-family output shape rules they name, ``inference``
binds types and infers shapes, ``onnx_schema`` registers them with ONNX, ``docs`` renders
docs/OPS.md."""

from .docs import docs_markdown
from .inference import bind_types, infer_outputs
from .onnx_schema import attribute_values, register_schemas
from .shapes import Dim, Shape
from .specs import OpSpec, choice_rule, choices, default, elem_type, load_op_specs

__all__ = [
    "Dim",
    "OpSpec",
    "Shape",
    "attribute_values",
    "bind_types",
    "choice_rule",
    "choices",
    "default",
    "docs_markdown",
    "elem_type",
    "infer_outputs",
    "load_op_specs",
    "register_schemas",
]
