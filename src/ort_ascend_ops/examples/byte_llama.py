"""A tiny Hugging Face Llama over bytes (vocabulary 256, ``ort_ascend_ops.training.data``),
sized to train for a few hundred steps on two CPU cores in a minute or two and still learn real
structure of Python source (its loss falls from ln 256 = 5.55 to about 2). ``models/byte_llama.py``
exports it; tests rebuild the identical torch model with ``module()``. Needs the ``[torch]``
extra, imported only when the model is made."""

from __future__ import annotations

from pathlib import Path

from . import committed_model

# The single source of the model's size: hidden 128 = 4 query heads of 32 over 2 key-value heads,
# two layers (at 300 steps a third layer learns slower, and costs a third more per step), untied
# embeddings (input and output byte tables learn different things), about 460k parameters.
# Trained with AdamW at lr 1e-3 (3e-3 is too high: 2.26 after 300 steps instead of 1.97).
CONFIG = dict(
    vocab_size=256,
    hidden_size=128,
    intermediate_size=384,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    max_position_embeddings=1024,
    tie_word_embeddings=False,
    use_cache=False,
)
SEED = 0
BATCH = 8
SEQUENCE = 128
LEARNING_RATE = 1e-3
LOSS = "loss"
OPSET = 23
FILE = "byte_llama.onnx"


def model_path() -> Path:
    """The committed export (in the wheel, or in a source checkout's models/)."""
    return committed_model(FILE)


def describe() -> str:
    c = CONFIG
    return (
        f"hidden {c['hidden_size']}, {c['num_hidden_layers']} layers, {c['num_attention_heads']} heads over "
        f"{c['num_key_value_heads']} key-value heads of {c['head_dim']}, MLP {c['intermediate_size']}, "
        f"vocabulary {c['vocab_size']} bytes"
    )


def module(seed: int = SEED, config: dict | None = None):
    """The randomly initialised ``LlamaForCausalLM`` (transformers' own init, drawn from
    ``seed``); ``config`` overrides entries of ``CONFIG``."""
    import torch
    import transformers

    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**(CONFIG | (config or {}))))


def export(seed: int = SEED, config: dict | None = None):
    """The model exported by ``export_torch`` with its loss inside (``input_ids`` and ``labels``
    in; ``loss`` and ``logits`` out), batch and sequence dynamic."""
    import numpy as np
    import torch

    from ..training import export_torch

    ids = torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (2, 16), dtype=np.int64))
    inputs = {"input_ids": ids, "labels": ids.clone()}
    size, length = torch.export.Dim("batch"), torch.export.Dim("sequence")
    dynamic = {name: {0: size, 1: length} for name in inputs}
    return export_torch(module(seed, config).eval(), inputs, dynamic_shapes=dynamic, opset=OPSET)
