"""Builds and saves the DeepSeek indexer loss example beside this script: ``indexer_loss.onnx``
(forward: the loss ``KL(p || softmax(selected scores))`` and the selection) and
``indexer_loss_training.onnx`` (the loss and its gradients w.r.t. query, key and weights). The
model code is ``ort_ascend_ops.examples.indexer_loss``; run ``python models/indexer_loss.py``
after changing it (``tests/test_models.py`` checks that the files match)."""

from __future__ import annotations

from pathlib import Path

from ort_ascend_ops.examples import run_hash_seeded, save_models
from ort_ascend_ops.examples.indexer_loss import Config, build

FILES = ("indexer_loss.onnx", "indexer_loss_training.onnx")

__all__ = ["FILES", "Config", "build", "main"]


def main(directory: Path = Path(__file__).parent) -> int:
    return save_models(directory, FILES, build())


if __name__ == "__main__":
    run_hash_seeded(main)
