"""A Hugging Face causal-LM directory as ``train`` takes it and gives it back (a ``ModelSource``):
the model built by transformers from its config and safetensors weights (sharded or not), its
tokenizer, and after training a directory ``AutoModelForCausalLM.from_pretrained`` loads, written
beside our artifacts and checkpoint. ``open`` checks every file (the config, each weight's shape
against the config's model, built on the meta device, so that a typo allocates nothing) before
``load`` builds anything; every rule a directory can break is a ``ModelError`` naming the file."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from safetensors import SafetensorError

from ..export import export_torch, packed_attention
from .lora import MERGED, Lora
from .lora import outputs as lora_outputs
from .model_source import BYTES, ModelError
from .settings import Settings

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
GENERATION_CONFIG = "generation_config.json"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")
_WRITTEN_WITH_TOKENIZER = ("special_tokens_map.json", "chat_template.jinja")
_STAGING = ".hf-staging"  # in --out, emptied into it once the whole directory is written


def _libraries():
    try:
        import torch
        import transformers
    except ImportError:
        raise ModelError(
            "training a Hugging Face directory needs PyTorch and transformers: pip install 'ort_ascend_ops[torch]'"
        ) from None
    return transformers, torch


class HfDirectory:
    """A causal-LM directory: after ``load``, ``model`` is its model in float32 (the master
    weights training needs), ``dtype`` the type its directory stores (what the output stores
    again), ``tokenizer`` its tokenizer (None: bytes)."""

    kind = "Hugging Face directory"

    def __init__(self, path: Path, config, headers: dict[str, tuple[Path, list[int]]], identity: str):
        self.path, self.config, self.identity = path, config, identity
        self.model: Any = None  # a transformers PreTrainedModel (a PEFT model with LoRA)
        self.lora: Lora | None = None
        self.pack, self.seq = False, 0  # --pack: per-document attention at --seq
        self._tokenizer: Any = None  # a transformers tokenizer, or None: bytes
        stored = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or "float32"
        self.dtype = str(stored).removeprefix("torch.")
        self._check_shapes(headers)

    @property
    def tokenizer(self) -> object | None:
        return self._tokenizer

    @property
    def vocab_size(self) -> int:
        return int(self.config.vocab_size)

    @classmethod
    def open(cls, directory: Path) -> HfDirectory:
        """The directory's files checked, nothing built (see the module's doc)."""
        config_path = directory / CONFIG
        if not config_path.is_file():
            raise ModelError(
                f"{directory}: no {CONFIG} (a Hugging Face model directory, as save_pretrained writes it, has one)"
            )
        try:
            text = config_path.read_bytes()
            raw = json.loads(text)
        except OSError as e:
            raise ModelError(f"{config_path}: cannot be read ({e.strerror or e})") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ModelError(f"{config_path}: not JSON ({e})") from None
        transformers, _ = _libraries()
        model_type = raw.get("model_type") if isinstance(raw, dict) else None
        if not model_type:
            raise ModelError(f"{config_path}: no 'model_type' (it names the architecture to build)")
        if model_type not in transformers.CONFIG_MAPPING:
            raise ModelError(
                f"{config_path}: model_type {model_type!r} is not an architecture transformers "
                f"{transformers.__version__} knows"
            )
        try:
            config = transformers.AutoConfig.from_pretrained(directory)
        except Exception as e:
            raise ModelError(f"{config_path}: transformers cannot read it: {e}") from None
        headers = _weight_headers(directory)
        shapes = {name: (file.name, shape) for name, (file, shape) in headers.items()}
        digest = hashlib.sha256(text + json.dumps(shapes, sort_keys=True).encode()).hexdigest()[:16]
        return cls(directory, config, headers, f"{model_type} {digest}")

    def _check_shapes(self, headers: dict[str, tuple[Path, list[int]]]) -> None:
        """Each weight's shape against the config's model, built on the meta device (no memory):
        a config whose sizes are not the weights' (a typo in ``vocab_size``, say) is refused
        before anything of its size is allocated."""
        transformers, torch = _libraries()
        try:
            with torch.device("meta"):
                skeleton = transformers.AutoModelForCausalLM.from_config(self.config)
        except Exception as e:
            raise ModelError(
                f"{self.path}: transformers cannot build its {self.config.model_type}: {e}"
            ) from None
        groups: dict[int, list[str]] = {}
        shapes = {}
        for name, parameter in skeleton.named_parameters(remove_duplicate=False):
            groups.setdefault(id(parameter), []).append(name)
            shapes[name] = list(parameter.shape)
        if not any(name in headers for name in shapes):
            return  # weights under other names (an older layout): transformers maps them as it loads
        for name, expected in shapes.items():
            if name in headers and headers[name][1] != expected:
                file, shape = headers[name]
                raise ModelError(
                    f"{file}: '{name}' is {shape}, where {CONFIG} makes it {expected}: its weights do not match {CONFIG}"
                )
        missing = [names[0] for names in groups.values() if not any(n in headers for n in names)]
        if missing:
            raise ModelError(
                f"{self.path}: its weights do not match {CONFIG}: the weights lack {sorted(missing)[:5]}"
                + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            )

    def load(self, say: Callable[[str], None]) -> None:
        """Reads the tokenizer and builds the model from the weights in float32."""
        transformers, torch = _libraries()
        self._tokenizer = _tokenizer(self.path, transformers, self.vocab_size, say)
        try:
            model, info = transformers.AutoModelForCausalLM.from_pretrained(
                self.path, dtype=torch.float32, output_loading_info=True, ignore_mismatched_sizes=True
            )
        except Exception as e:
            raise ModelError(
                f"{self.path}: transformers cannot build its {self.config.model_type}: {e}"
            ) from None
        wrong = {k: info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys") if info.get(k)}
        if wrong:
            said = "; ".join(f"{k.replace('_', ' ')}: {sorted(map(str, v))[:5]}" for k, v in wrong.items())
            raise ModelError(f"{self.path}: its weights do not match {CONFIG}: {said}")
        model.config.use_cache = False
        _check_causal(self.path, model, torch)
        if self.pack:
            try:
                packed_attention.check_packable(model, self.seq)
            except packed_attention.PackingError as e:
                raise ModelError(f"--pack: {self.path}: {e}") from None
        self.model = model if self.lora is None else self.lora.wrap(model)

    def check(self, settings: Settings) -> None:
        self.lora = Lora.of(settings)
        self.pack, self.seq = settings.pack, settings.seq
        positions = getattr(self.config, "max_position_embeddings", None)
        if isinstance(positions, int) and settings.seq > positions:
            raise ModelError(
                f"{self.path / CONFIG}: the model has {positions} positions (max_position_embeddings); "
                f"--seq {settings.seq} is past them"
            )

    def export(self, settings: Settings) -> onnx.ModelProto:
        """The model with its cross-entropy loss (``labels`` = ``input_ids``, shifted inside), as
        ``export_torch`` exports it for training: one initializer per parameter, named by its
        ``state_dict`` key."""
        import torch

        if self.pack:  # per-document attention: positions and boundaries are inputs too
            inputs = packed_attention.sample(settings.batch, settings.seq)
            with packed_attention.packed(self.model):
                return export_torch(
                    self.model, inputs, dynamic_shapes=packed_attention.dynamic_shapes(inputs)
                )
        ids = torch.zeros(settings.batch, settings.seq, dtype=torch.long)
        # Two tensors: torch.export makes one tensor passed twice one graph input.
        return export_torch(self.model, {"input_ids": ids, "labels": ids.clone()})

    def describe(self) -> str:
        if self.lora is not None:
            c = self.model.peft_config["default"]
            return (
                f" with LoRA r {c.r} alpha {c.lora_alpha} dropout {c.lora_dropout:g} on {_targets(c)}"
                f" (its base frozen, stored as {self.dtype})"
            )
        return f" (stored as {self.dtype}, trained in float32 masters)"

    def input_names(self) -> list[str]:
        names = ["input_ids", "labels"]
        return [*names, packed_attention.POSITIONS, packed_attention.BOUNDARIES] if self.pack else names

    def outputs(self, settings: Settings) -> list[str]:
        if settings.lora:
            return [*lora_outputs(settings.merge), *_TOKENIZER_FILES, *_WRITTEN_WITH_TOKENIZER]
        return [CONFIG, WEIGHTS, INDEX, GENERATION_CONFIG, *_TOKENIZER_FILES, *_WRITTEN_WITH_TOKENIZER]

    def write(self, parameters: dict[str, np.ndarray], out: Path) -> list[str]:
        """Writes the Hugging Face directory of ``parameters`` (name -> NumPy array, the
        checkpoint's, read only) into ``out``: config, safetensors weights in the stored type,
        tokenizer, and the generation config where the input had one; with LoRA, PEFT's adapter
        directory and the tokenizer (and with ``--merge``, the merged model in ``out/merged``).
        Everything is written to a staging folder first, so a failure (a full disk) leaves what
        ``out`` held. Returns the files written."""
        import torch

        model = self.model
        # load_state_dict copies into the model's own tensors: the views need no copy of their own.
        loaded = {name: torch.from_numpy(value) for name, value in parameters.items()}
        missing, unexpected = model.load_state_dict(loaded, strict=False)
        if unexpected:
            raise ModelError(f"the checkpoint holds weights the model has not: {sorted(unexpected)}")
        # Tied weights (an lm_head sharing the embedding) are one initializer under the first name.
        state = model.state_dict()
        shared = {state[name].data_ptr() for name in loaded if name in state}
        untrained = [name for name in missing if state[name].data_ptr() not in shared]
        if untrained:
            raise ModelError(f"the checkpoint lacks weights of the model: {sorted(untrained)}")
        staging = out / _STAGING
        shutil.rmtree(staging, ignore_errors=True)
        try:
            if self.lora is None:
                self._save(model, staging)
            else:
                model.save_pretrained(staging)  # PEFT's adapter directory, its weights in float32
                if self._tokenizer is not None:
                    self._tokenizer.save_pretrained(staging)
                if self.lora.merge:
                    self._save(model.merge_and_unload(), staging / MERGED)
            written = sorted(p.name for p in staging.iterdir())
            for name in written:
                if (out / name).is_dir():
                    shutil.rmtree(out / name)
                os.replace(staging / name, out / name)
        except SafetensorError as e:  # safetensors reports a full disk as its own error
            raise OSError(f"safetensors could not write the weights: {e}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return written

    def _save(self, model, directory: Path) -> None:
        """``model`` as a Hugging Face directory in the stored type, with the tokenizer and the
        input's generation config."""
        import torch

        try:
            model.to(getattr(torch, self.dtype)).save_pretrained(directory)
        finally:
            model.float()
        if self._tokenizer is not None:
            self._tokenizer.save_pretrained(directory)
        source = self.path / GENERATION_CONFIG
        if source.exists():
            shutil.copyfile(source, directory / GENERATION_CONFIG)
        else:
            (directory / GENERATION_CONFIG).unlink(missing_ok=True)


def _targets(config) -> str:
    """The target modules by their last names (``q_proj``), once each."""
    targets = config.target_modules
    return targets if isinstance(targets, str) else ", ".join(sorted({t.rsplit(".", 1)[-1] for t in targets}))


def _weight_headers(directory: Path) -> dict[str, tuple[Path, list[int]]]:
    """Every tensor's file and shape, from the safetensors files the directory names, each with a
    readable header that fits its file (safetensors checks every tensor's offsets against the
    file's size)."""
    from safetensors import safe_open

    index = directory / INDEX
    if index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ModelError(f"{index}: not a safetensors index with a 'weight_map' ({e})") from None
        for shard in shards:
            if not (directory / shard).is_file():
                raise ModelError(f"{index}: names the shard {shard}, which {directory} lacks")
        files = [directory / s for s in shards]
    elif (directory / WEIGHTS).is_file():
        files = [directory / WEIGHTS]
    else:
        raise ModelError(
            f"{directory}: no {WEIGHTS} nor {INDEX} (the weights must be safetensors, as save_pretrained writes them)"
        )
    headers: dict[str, tuple[Path, list[int]]] = {}
    for path in files:
        try:
            with safe_open(path, framework="numpy") as f:
                names = list(f.keys())
                headers |= {name: (path, list(f.get_slice(name).get_shape())) for name in names}
        except Exception as e:
            raise ModelError(f"{path}: not a readable safetensors file ({e})") from None
        if not names:
            raise ModelError(f"{path}: holds no tensors")
    return headers


def _check_causal(directory: Path, model, torch) -> None:
    """Refuses a model whose first positions see the later ones (an encoder, BERT with a decoder
    head but no ``is_decoder``): ``train`` trains it with the causal-LM loss, which such a model
    would learn by reading the answer."""
    vocab = int(model.config.vocab_size)
    first = torch.tensor([[1 % vocab, 2 % vocab, 3 % vocab]])
    second = first.clone()
    second[0, 2] = 4 % vocab
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            a, b = (model(input_ids=ids).logits[0, :2] for ids in (first, second))
    finally:
        model.train(was_training)
    if not torch.allclose(a, b, rtol=1e-5, atol=1e-6):
        raise ModelError(
            f"{directory}: its {model.config.model_type} is not a causal language model (the logits of the "
            "first positions change with a later token: its attention sees the whole sequence); train trains "
            "causal LMs only"
        )


def _tokenizer(directory: Path, transformers, vocab_size: int, say):
    if not any((directory / name).exists() for name in _TOKENIZER_FILES):
        if vocab_size < BYTES:
            raise ModelError(
                f"{directory}: no tokenizer files ({', '.join(_TOKENIZER_FILES)}), and its vocabulary of "
                f"{vocab_size} tokens cannot take bytes ({BYTES})"
            )
        say(
            f"{directory}: no tokenizer files: training on bytes (ids 0-255 of its {vocab_size}-token vocabulary)"
        )
        return None
    try:
        return transformers.AutoTokenizer.from_pretrained(directory)
    except Exception as e:
        raise ModelError(f"{directory}: its tokenizer cannot be read: {e}") from None
