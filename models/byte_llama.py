"""Exports the byte-level Llama (``ort_ascend_ops.examples.byte_llama``) into ``byte_llama.onnx``
beside this script, as ``export_torch`` gives it: ``input_ids`` and ``labels`` in (batch and
sequence dynamic), ``loss`` and ``logits`` out, opset 23, every parameter an initializer named by
its ``state_dict`` key and initialised from seed 0; the exporter's per-node debug metadata
(source lines) is dropped. The demo trains it on ``Corpus.python_stdlib()``. Needs the
``[torch]`` extra; run ``python models/byte_llama.py`` after changing the model's ``CONFIG``."""

from __future__ import annotations

import sys
from pathlib import Path

import onnx

from ort_ascend_ops.examples import byte_llama, without_debug_metadata


def main(directory: Path = Path(__file__).parent) -> int:
    model = without_debug_metadata(byte_llama.export())
    onnx.checker.check_model(model)
    onnx.save(model, directory / byte_llama.FILE)
    print(f"wrote {directory / byte_llama.FILE} ({(directory / byte_llama.FILE).stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
