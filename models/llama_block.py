"""Builds and saves the Llama-style decoder block example beside this script:
``llama_block.onnx`` (forward; loss = MSE against ``target``) and ``llama_block_training.onnx``
(the loss and every weight's gradient). The model code is ``ort_ascend_ops.examples.llama_block``;
run ``python models/llama_block.py`` after changing it (``tests/test_models.py`` checks that the
files match). onnxscript names a few values of the reference functions in set order, so the script
runs itself with ``PYTHONHASHSEED=0`` to write the same bytes every time."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import onnx

from ort_ascend_ops.examples.llama_block import Config, build

FILES = ("llama_block.onnx", "llama_block_training.onnx")

__all__ = ["FILES", "Config", "build", "main"]


def main(directory: Path = Path(__file__).parent) -> int:
    for name, model in zip(FILES, build(), strict=True):
        onnx.save(model, directory / name)
        print(f"wrote {directory / name} ({(directory / name).stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    sys.exit(main())
