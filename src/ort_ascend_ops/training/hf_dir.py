"""A Hugging Face causal-LM directory as ``train`` takes it and gives it back: the model built by
transformers from its config and safetensors weights (sharded or not), its tokenizer, and after
training a directory ``AutoModelForCausalLM.from_pretrained`` loads, written beside our artifacts
and checkpoint. Every rule a directory can break is a ``ModelDirectoryError`` naming the file."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path

import onnx
from safetensors import SafetensorError

from ..export import export_torch

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
GENERATION_CONFIG = "generation_config.json"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
_STAGING = ".hf-staging"  # in --out, emptied into it once the whole directory is written


class ModelDirectoryError(ValueError):
    """A directory ``train`` cannot take; the CLI exits with 2."""


@dataclasses.dataclass
class HfModel:
    """The model in float32 (the master weights training needs), the type its directory stores
    (``dtype``: what the output directory stores again), its tokenizer (None: bytes) and where it
    came from."""

    directory: Path
    model: object  # a transformers PreTrainedModel
    tokenizer: object | None
    dtype: str
    identity: str  # the architecture and a hash of config.json: what a resumed run must match

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)  # type: ignore[attr-defined]

    def export(self, batch: int, seq: int) -> onnx.ModelProto:
        """The model with its cross-entropy loss (``labels`` = ``input_ids``, shifted inside), as
        ``export_torch`` exports it for training: one initializer per parameter, named by its
        ``state_dict`` key."""
        import torch

        ids = torch.zeros(batch, seq, dtype=torch.long)
        # Two tensors: torch.export makes one tensor passed twice one graph input.
        return export_torch(self.model, {"input_ids": ids, "labels": ids.clone()})

    def save(self, parameters: dict, out: Path) -> list[str]:
        """Writes the Hugging Face directory of ``parameters`` (name -> NumPy array, the
        checkpoint's, read only) into ``out``: config, safetensors weights in the stored type, tokenizer, and
        the generation config where the input had one. Everything is written to a staging folder
        first, so a failure (a full disk) leaves what ``out`` held. Returns the files written."""
        import torch

        model = self.model
        # load_state_dict copies into the model's own tensors: the views need no copy of their own.
        loaded = {name: torch.from_numpy(value) for name, value in parameters.items()}
        missing, unexpected = model.load_state_dict(loaded, strict=False)  # type: ignore[attr-defined]
        if unexpected:
            raise ModelDirectoryError(f"the checkpoint holds weights the model has not: {sorted(unexpected)}")
        # Tied weights (an lm_head sharing the embedding) are one initializer under the first name.
        state = model.state_dict()  # type: ignore[attr-defined]
        shared = {state[name].data_ptr() for name in loaded if name in state}
        untrained = [name for name in missing if state[name].data_ptr() not in shared]
        if untrained:
            raise ModelDirectoryError(f"the checkpoint lacks weights of the model: {sorted(untrained)}")
        staging = out / _STAGING
        shutil.rmtree(staging, ignore_errors=True)
        try:
            model.to(getattr(torch, self.dtype)).save_pretrained(staging)  # type: ignore[attr-defined]
            if self.tokenizer is not None:
                self.tokenizer.save_pretrained(staging)  # type: ignore[attr-defined]
            source = self.directory / GENERATION_CONFIG
            if source.exists():
                shutil.copyfile(source, staging / GENERATION_CONFIG)
            else:
                (staging / GENERATION_CONFIG).unlink(missing_ok=True)
            written = sorted(p.name for p in staging.iterdir())
            for name in written:
                os.replace(staging / name, out / name)
        except SafetensorError as e:  # safetensors reports a full disk as its own error
            raise OSError(f"safetensors could not write the weights: {e}") from None
        finally:
            model.float()  # type: ignore[attr-defined]
            shutil.rmtree(staging, ignore_errors=True)
        return written


def is_model_directory(path: str | os.PathLike) -> bool:
    return Path(path).is_dir()


def load(directory: str | os.PathLike, say=print) -> HfModel:
    """The directory's model, checked file by file before transformers reads it."""
    directory = Path(directory)
    config_path = directory / CONFIG
    if not config_path.is_file():
        raise ModelDirectoryError(
            f"{directory}: no {CONFIG} (a Hugging Face model directory, as save_pretrained writes it, has one)"
        )
    text = config_path.read_bytes()
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelDirectoryError(f"{config_path}: not JSON ({e})") from None
    transformers, torch = _libraries()
    model_type = raw.get("model_type") if isinstance(raw, dict) else None
    if not model_type:
        raise ModelDirectoryError(f"{config_path}: no 'model_type' (it names the architecture to build)")
    if model_type not in transformers.CONFIG_MAPPING:
        raise ModelDirectoryError(
            f"{config_path}: model_type {model_type!r} is not an architecture transformers "
            f"{transformers.__version__} knows"
        )
    try:
        config = transformers.AutoConfig.from_pretrained(directory)
    except Exception as e:
        raise ModelDirectoryError(f"{config_path}: transformers cannot read it: {e}") from None
    _check_weights(directory)
    try:
        model, info = transformers.AutoModelForCausalLM.from_pretrained(
            directory, dtype=torch.float32, output_loading_info=True, ignore_mismatched_sizes=True
        )
    except Exception as e:
        raise ModelDirectoryError(f"{directory}: transformers cannot build its {model_type}: {e}") from None
    wrong = {k: info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys") if info.get(k)}
    if wrong:
        # Mismatched sizes were loaded as fresh weights (ignore_mismatched_sizes): refused here, naming them.
        said = "; ".join(f"{k.replace('_', ' ')}: {sorted(map(str, v))[:5]}" for k, v in wrong.items())
        raise ModelDirectoryError(f"{directory}: its weights do not match {CONFIG}: {said}")
    model.config.use_cache = False
    stored = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or torch.float32
    dtype = str(stored).removeprefix("torch.")
    tokenizer = _tokenizer(directory, transformers, int(config.vocab_size), say)
    identity = f"{model_type} {hashlib.sha256(text).hexdigest()[:16]}"
    return HfModel(directory, model, tokenizer, dtype, identity)


def _libraries():
    try:
        import torch
        import transformers
    except ImportError:
        raise ModelDirectoryError(
            "training a Hugging Face directory needs PyTorch and transformers: pip install 'ort_ascend_ops[torch]'"
        ) from None
    return transformers, torch


def _check_weights(directory: Path) -> None:
    """The safetensors files the directory names exist and have readable headers that fit
    their files (safetensors checks every tensor's offsets against the file's size)."""
    from safetensors import safe_open

    index = directory / INDEX
    if index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ModelDirectoryError(f"{index}: not a safetensors index with a 'weight_map' ({e})") from None
        for shard in shards:
            if not (directory / shard).is_file():
                raise ModelDirectoryError(f"{index}: names the shard {shard}, which {directory} lacks")
        files = [directory / s for s in shards]
    elif (directory / WEIGHTS).is_file():
        files = [directory / WEIGHTS]
    else:
        raise ModelDirectoryError(
            f"{directory}: no {WEIGHTS} nor {INDEX} (the weights must be safetensors, as save_pretrained writes them)"
        )
    for path in files:
        try:
            with safe_open(path, framework="numpy") as f:
                names = list(f.keys())
        except Exception as e:
            raise ModelDirectoryError(f"{path}: not a readable safetensors file ({e})") from None
        if not names:
            raise ModelDirectoryError(f"{path}: holds no tensors")


def _tokenizer(directory: Path, transformers, vocab_size: int, say):
    if not any((directory / name).exists() for name in _TOKENIZER_FILES):
        if vocab_size < 256:
            raise ModelDirectoryError(
                f"{directory}: no tokenizer files ({', '.join(_TOKENIZER_FILES)}), and its vocabulary of "
                f"{vocab_size} tokens cannot take bytes (256)"
            )
        say(
            f"{directory}: no tokenizer files: training on bytes (ids 0-255 of its {vocab_size}-token vocabulary)"
        )
        return None
    try:
        return transformers.AutoTokenizer.from_pretrained(directory)
    except Exception as e:
        raise ModelDirectoryError(f"{directory}: its tokenizer cannot be read: {e}") from None
