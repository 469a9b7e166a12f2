"""LoRA on a Hugging Face directory, by PEFT: ``--lora-*`` make a ``peft.LoraConfig`` (its meanings
and defaults), ``--adapter`` reads one an adapter directory holds; the model is wrapped by
``get_peft_model`` before it is exported, so the export records the base weights as frozen and the
adapters alone as trained (``generate_artifacts`` then gives the base no gradient, no optimizer
state and no weight-gradient product). The trained adapters are written back by PEFT's own
``save_pretrained``, which ``PeftModel.from_pretrained`` loads; ``--merge`` adds the merged model.
Every way an adapter directory or a target can be wrong is a ``ModelError`` naming it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from .model_source import ModelError
from .settings import Settings, flag

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
MERGED = "merged"  # --merge's Hugging Face directory, inside --out
_OPTIONS = {
    "lora_r": "r",
    "lora_alpha": "lora_alpha",
    "lora_dropout": "lora_dropout",
    "lora_target": "target_modules",
}


def _peft():
    try:
        import peft
    except ImportError:
        raise ModelError(
            "LoRA needs PEFT: pip install 'ort_ascend_ops[torch]' (or pip install peft)"
        ) from None
    return peft


@dataclasses.dataclass(frozen=True)
class Lora:
    """The adapters a run trains: ``config`` (a ``peft.LoraConfig``), the adapter directory
    whose weights they start from (None: PEFT's initialization), and whether the merged model is
    written too."""

    config: object
    adapter: Path | None
    merge: bool = False

    @classmethod
    def of(cls, settings: Settings) -> Lora | None:
        if not settings.lora:
            return None
        peft = _peft()
        if settings.adapter is None:
            given = {key: getattr(settings, name) for name, key in _OPTIONS.items()}
            given = {k: v for k, v in given.items() if v is not None}
            if "target_modules" in given:
                targets = list(given["target_modules"])
                given["target_modules"] = "all-linear" if targets == ["all-linear"] else targets
            return cls(peft.LoraConfig(task_type="CAUSAL_LM", **given), None, settings.merge)
        directory = Path(settings.adapter)
        return cls(_adapter_config(peft, directory, settings), directory, settings.merge)

    def wrap(self, model):
        """``model`` (a transformers model) with the adapters, the base frozen."""
        peft = _peft()
        try:
            wrapped = peft.get_peft_model(model, self.config)
        except ValueError as e:  # PEFT's "Target modules ... not found in the base model"
            raise ModelError(f"--lora-target: {e}") from None
        if self.adapter is not None:
            _load_adapter(peft, wrapped, self.adapter)
        return wrapped


def _adapter_config(peft, directory: Path, settings: Settings):
    path = directory / ADAPTER_CONFIG
    if not path.is_file():
        raise ModelError(f"--adapter {directory}: no {ADAPTER_CONFIG} (a PEFT adapter directory has one)")
    try:
        raw = json.loads(path.read_text())
        config = peft.LoraConfig.from_pretrained(directory)
    except (OSError, ValueError, TypeError) as e:
        raise ModelError(f"{path}: not a PEFT adapter config ({e})") from None
    if raw.get("peft_type") != "LORA":
        raise ModelError(f"{path}: a {raw.get('peft_type')} adapter, not LoRA")
    for name, key in _OPTIONS.items():
        given, theirs = getattr(settings, name), getattr(config, key)
        if given is None or (name == "lora_target" and tuple(given) == ("all-linear",)):
            continue
        if isinstance(theirs, (set, list, tuple)):
            theirs = sorted(theirs)
            given = sorted(given)
        elif name == "lora_target":
            given = given[0] if len(given) == 1 else sorted(given)
        if given != theirs:
            raise ModelError(
                f"{flag(name)} {given} contradicts the adapter in {directory}, made with {key}={theirs} "
                f"(leave {flag(name)} out to take the adapter's)"
            )
    config.inference_mode = False
    return config


def _load_adapter(peft, wrapped, directory: Path) -> None:
    """The adapter's weights into ``wrapped``, each checked against the tensor PEFT made for it:
    an adapter of another base model (other layers, another hidden size) or rank is refused."""
    from safetensors import safe_open

    path = directory / ADAPTER_WEIGHTS
    if not path.is_file():
        raise ModelError(f"--adapter {directory}: no {ADAPTER_WEIGHTS}")
    expected = {k: list(v.shape) for k, v in peft.get_peft_model_state_dict(wrapped).items()}
    try:
        with safe_open(path, framework="pt") as f:
            stored = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:
        raise ModelError(f"{path}: not a readable safetensors file ({e})") from None
    base = json.loads((directory / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
    made_for = f" (it was made for {base})" if base else ""
    missing, unexpected = sorted(set(expected) - set(stored)), sorted(set(stored) - set(expected))
    if missing or unexpected:
        said = f"lacks {missing[:3]}" if missing else f"has {unexpected[:3]}, which this model has not"
        raise ModelError(f"{path}: not an adapter of this model{made_for}: it {said}")
    for name, shape in expected.items():
        if list(stored[name].shape) != shape:
            raise ModelError(
                f"{path}: '{name}' is {list(stored[name].shape)}, where this model and the adapter's r make it "
                f"{shape}: an adapter of another model{made_for} or another r"
            )
    peft.set_peft_model_state_dict(wrapped, stored)


def outputs(merge: bool) -> list[str]:
    return [ADAPTER_CONFIG, ADAPTER_WEIGHTS, *([MERGED] if merge else [])]
