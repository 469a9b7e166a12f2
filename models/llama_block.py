"""Builds and saves the Llama-style decoder block example beside this script:
``llama_block.onnx`` (forward; loss = MSE against ``target``) and ``llama_block_training.onnx``
(the loss and every weight's gradient). The model code is ``ort_ascend_ops.examples.llama_block``;
run ``python models/llama_block.py`` after changing it (``tests/test_models.py`` checks that the
files match)."""

from __future__ import annotations

from pathlib import Path

from ort_ascend_ops.examples import run_hash_seeded, save_models
from ort_ascend_ops.examples.llama_block import Config, build

FILES = ("llama_block.onnx", "llama_block_training.onnx")

__all__ = ["FILES", "Config", "build", "main"]


def main(directory: Path = Path(__file__).parent) -> int:
    return save_models(directory, FILES, build())


if __name__ == "__main__":
    run_hash_seeded(main)
