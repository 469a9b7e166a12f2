"""Training: :mod:`.artifacts` (``generate_artifacts``) and :mod:`.api` (``CheckpointState``,
``Module``, ``Optimizer``, ``LinearLRScheduler``) are onnxruntime-training's interface over the
differentiator (:mod:`ort_ascend_ops.autodiff`) and the PyTorch export
(:mod:`ort_ascend_ops.export`), whose entry points are re-exported here;
:func:`indexer_warmup` makes a DeepSeek-V3.2 export the model of its indexer's training (DSA).
``python -m ort_ascend_ops train`` is :mod:`ort_ascend_ops.trainer`, over this API."""

from ..autodiff import RULES, GradientError, build_training_model
from ..export import export_torch
from .indexer_warmup import INDEXER_LOSS, indexer_warmup

__all__ = ["INDEXER_LOSS", "RULES", "GradientError", "build_training_model", "export_torch", "indexer_warmup"]
