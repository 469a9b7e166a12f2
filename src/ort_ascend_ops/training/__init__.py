"""Training: :func:`build_training_model` differentiates a forward ONNX model (fused first by
:func:`ort_ascend_ops.fuse`), emitting this package's grad ops for its forward ops and standard
ops for the rest; :func:`export_torch` exports a PyTorch module for it (the ``[torch]`` extra).
:mod:`.artifacts` (``generate_artifacts``) and :mod:`.api` (``CheckpointState``, ``Module``,
``Optimizer``, ``LinearLRScheduler``) are onnxruntime-training's interface over them;
:mod:`.loop` is the training loop of ``python -m ort_ascend_ops train``."""

from .autodiff import build_training_model
from .export import export_torch
from .graph import GradientError
from .rules import RULES

__all__ = ["RULES", "GradientError", "build_training_model", "export_torch"]
