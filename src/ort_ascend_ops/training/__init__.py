"""Training graphs: :func:`build_training_model` differentiates a forward ONNX model (fused first
by :func:`ort_ascend_ops.fuse`), emitting this package's grad ops for its forward ops and standard
ops for the rest; :func:`export_torch` exports a PyTorch module for it (the ``[torch]`` extra)."""

from .autodiff import build_training_model
from .export import export_torch
from .graph import GradientError
from .rules import RULES

__all__ = ["RULES", "GradientError", "build_training_model", "export_torch"]
