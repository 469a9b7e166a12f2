"""The graph differentiator: :func:`build_training_model` differentiates a forward ONNX model
(fused first by :func:`ort_ascend_ops.fuse`), emitting this package's grad ops for its forward ops
and standard ops for the rest, one rule per op (``RULES``, in ``rules/``) built through
:class:`.graph.Backward`."""

from .graph import GradientError, depends_on, grad_name, node_label
from .rules import RULES
from .training_model import build_training_model

__all__ = ["RULES", "GradientError", "build_training_model", "depends_on", "grad_name", "node_label"]
