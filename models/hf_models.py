"""Exports the Hugging Face test cases (``ort_ascend_ops.examples.hf_models``) into ``hf/``
beside this script, as ``export_torch`` gives them, with PyTorch's gradients:

- ``hf/<case>.onnx``: each export, its initializers stored in ``hf/<arch>_<loss>.weights``
  (ONNX external data; every export of a model holds the same weights) and the exporter's
  per-node debug metadata (source lines, about 1 MB a model) dropped;
- ``hf/<arch>_<loss>_b<batch>.npz``: the batch (the graph's inputs), ``loss`` and ``grad/<name>``
  for every parameter, from ``torch.autograd``;
- the bfloat16 case: ``hf/llama_dynamic_opset23_ce_bf16.onnx`` (weights inside) and
  ``hf/llama_ce_b2_bf16.npz``.

Needs the ``[torch]`` extra; ``tests/test_hf_models.py`` tests against these files always and,
with torch installed, exports a case of each architecture again live."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx

from ort_ascend_ops.examples import hf_models as hf
from ort_ascend_ops.examples import without_debug_metadata

BFLOAT16_CASE = hf.Export("llama", "dynamic", 23, "ce", None)


def _strip(model: onnx.ModelProto) -> onnx.ModelProto:
    without_debug_metadata(model)
    del model.metadata_props[:]
    return model


def _externalize(
    model: onnx.ModelProto, location: str, offsets: dict[str, tuple[int, bytes]], blob: bytearray
):
    """Points each initializer at its bytes in ``blob`` (appended the first time a name is seen;
    later exports must hold the same bytes)."""
    for init in model.graph.initializer:
        data = onnx.numpy_helper.to_array(init).tobytes() if not init.HasField("raw_data") else init.raw_data
        if init.name not in offsets:
            offsets[init.name] = (len(blob), data)
            blob.extend(data)
        offset, known = offsets[init.name]
        assert known == data, f"{init.name} differs between exports"
        onnx.external_data_helper.set_external_data(init, location, offset, len(data))
        init.data_location = onnx.TensorProto.EXTERNAL
        init.ClearField("raw_data")


def main(directory: Path = Path(__file__).parent / "hf") -> int:
    import torch

    directory.mkdir(exist_ok=True)
    blobs: dict[str, tuple[dict, bytearray]] = {}
    for case in hf.exports():
        model = _strip(hf.export(case))
        weights = f"{case.arch}_{case.loss}.weights"
        offsets, blob = blobs.setdefault(weights, ({}, bytearray()))
        _externalize(model, weights, offsets, blob)
        onnx.save(model, directory / f"{case.name}.onnx")
        print(f"wrote {case.name}.onnx", flush=True)
    for weights, (_, blob) in blobs.items():
        (directory / weights).write_bytes(bytes(blob))
    for arch in hf.ARCHITECTURES:
        for loss in hf.LOSSES:
            for size in hf.BATCHES:
                _save_gradients(directory / f"{hf.gradients_name(arch, loss, size)}.npz", arch, loss, size)
    case = BFLOAT16_CASE
    onnx.save(_strip(hf.export(case, torch.bfloat16)), directory / f"{case.name}_bf16.onnx")
    _save_gradients(
        directory / f"{hf.gradients_name(case.arch, case.loss, 2)}_bf16.npz",
        case.arch,
        case.loss,
        2,
        torch.bfloat16,
    )
    return 0


def _save_gradients(path: Path, arch: str, loss: str, size: int, dtype=None) -> None:
    grads = hf.torch_gradients(arch, loss, size, dtype)
    arrays = {**hf.batch(loss, size), "loss": grads.pop("loss")}
    arrays |= {f"grad/{name}": g for name, g in grads.items()}
    np.savez(path, **arrays)
    print(f"wrote {path.name}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
