"""Exports the DeepSeek-V3.2 fixtures (``ort_ascend_ops.examples.deepseek_v32``) into ``hf/``
beside this script, with PyTorch's side of the indexer warm-up:

- ``hf/deepseek_v32_b<batch>.onnx``: the tiny random ``DeepseekV32ForCausalLM`` exported by
  ``export_torch`` for batches of 1 and 2 (shapes static, opset 23, the LM loss inside; eager
  and SDPA attention, ``ATTENTION``), less the exporter's per-node debug metadata; the batch-2
  file is also the demo's model;
- ``hf/deepseek_v32_b<batch>.npz``: the batch (``input_ids``, ``labels``) and what
  ``torch_warmup`` gives: the indexer loss, ``grad/<name>`` of every indexer parameter, the
  losses of a few ``torch.optim.AdamW`` steps, and transformers' own top-k indices and index
  scores per layer.

Needs the ``[torch]`` extra; ``tests/test_deepseek_v32.py`` tests against these files (the
README's example exports one live)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx

from ort_ascend_ops.examples import deepseek_v32 as ds
from ort_ascend_ops.examples import without_debug_metadata


def main(directory: Path = Path(__file__).parent / "hf") -> int:
    directory.mkdir(exist_ok=True)
    for size in ds.BATCHES:
        model = without_debug_metadata(ds.export(size))
        onnx.save(model, directory / f"{ds.name(size)}.onnx")
        np.savez(directory / f"{ds.name(size)}.npz", **ds.batch(size), **ds.torch_warmup(size))
        print(f"wrote {ds.name(size)}.onnx and .npz", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
