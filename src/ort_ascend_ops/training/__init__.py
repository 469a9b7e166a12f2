"""Training graphs: :func:`build_training_model` differentiates a forward ONNX model, emitting
this package's grad ops for its forward ops (and for the standard ``RMSNormalization`` and
``RotaryEmbedding``), and standard ops for the rest."""

from .autodiff import build_training_model
from .export import export_torch
from .graph import GradientError
from .rules import RULES

__all__ = ["RULES", "GradientError", "build_training_model", "export_torch"]
