"""Training: :func:`build_training_model` differentiates a forward ONNX model (fused first by
:func:`ort_ascend_ops.fuse`), emitting this package's grad ops for its forward ops and standard
ops for the rest; :func:`export_torch` exports a PyTorch module for it (the ``[torch]`` extra).
:mod:`.artifacts` (``generate_artifacts``) and :mod:`.api` (``CheckpointState``, ``Module``,
``Optimizer``, ``LinearLRScheduler``) are onnxruntime-training's interface over them;
:func:`indexer_warmup` makes a DeepSeek-V3.2 export the model of its indexer's training (DSA);
:mod:`.loop` is the training loop of ``python -m ort_ascend_ops train``."""

from .autodiff import build_training_model
from .export import export_torch
from .graph import GradientError
from .indexer_warmup import INDEXER_LOSS, indexer_warmup
from .rules import RULES

__all__ = ["INDEXER_LOSS", "RULES", "GradientError", "build_training_model", "export_torch", "indexer_warmup"]
