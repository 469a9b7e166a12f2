"""Every option of ``python -m ort_ascend_ops train`` in one dataclass, ``Settings``: each field
carries its default, type, choices, help text, rule and what a ``--resume`` does with it, and the
command line's parser is generated from them (as transformers' ``HfArgumentParser`` does from
``TrainingArguments``). A value that breaks its rule is a ``SettingsError`` naming the option.

What ``--resume`` does with an option (``resume=``): ``"same"``, the options that shape the run's
graph and numbers, must equal the run's, and take the run's when not given; ``"run"``, the run's
plan (its length, its data, how often it saves), takes the run's when not given and may change
when given; ``"command"`` belongs to the command alone (threads, where it runs, how it resumes)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import typing
from collections.abc import Callable, Mapping
from pathlib import Path

from ..autodiff.recompute import MODES as RECOMPUTE_MODES
from ..training.api.data_parallel import COLLECTIVE_TIMEOUT
from ..training.api.lr_scheduler import SCHEDULES
from ..training.optim import AdamW
from ..training.precision import PRECISIONS
from .chat_data import LOSS_ON


class SettingsError(ValueError):
    """Settings that cannot run (or cannot resume the run in --out); the CLI exits with 2."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """A condition on an option's value, and how ``--help`` and errors say it."""

    holds: Callable[[typing.Any], bool]
    says: str


def at_least(low: int) -> Rule:
    return Rule(lambda v: v >= low, f"at least {low}")


def finite_from(low: float, *, included: bool = True) -> Rule:
    relation = ">=" if included else ">"
    return Rule(
        lambda v: math.isfinite(v) and (v >= low if included else v > low),
        f"a finite number {relation} {low:g}",
    )


def _is_device(value: str) -> bool:
    kind, colon, index = value.partition(":")
    return value == "cpu" or (kind == "npu" and (not colon or index.isdigit()))


def option(
    default,
    help: str,
    *,
    rule: Rule | None = None,
    choices: typing.Sequence | None = None,
    resume: str = "same",
    positional: bool = False,
    many: bool = False,
):
    """A ``Settings`` field: ``help`` is the option's text in ``--help``, where its default, choices
    and rule are added."""
    return dataclasses.field(
        default=default,
        metadata={
            "help": help,
            "rule": rule,
            "choices": choices,
            "resume": resume,
            "positional": positional,
            "many": many,
        },
    )


@dataclasses.dataclass(frozen=True)
class Settings:
    """The ``train`` command's options (see the module's doc). ``given``: the options the command
    line gave (None: all of them, as when Python code makes the settings)."""

    model: str = option(
        None,
        "a Hugging Face causal-LM directory (config.json, safetensors weights, tokenizer files), or an ONNX "
        "model whose integer inputs all take the token window and whose output 'loss' is the loss",
        resume="command",
        positional=True,
    )
    data: tuple[str, ...] | None = option(
        None,
        "text files, .jsonl files (a 'text' field per line), folders, globs, or a datasets save_to_disk "
        "folder (default: this Python's standard library sources)",
        resume="run",
        many=True,
    )
    steps: int = option(
        300, "total optimizer steps, those of a resumed run included", rule=at_least(1), resume="run"
    )
    batch: int = option(8, "sequences per step (of each process under torchrun)", rule=at_least(1))
    seq: int = option(128, "tokens per sequence (a causal LM predicts seq - 1 of them)", rule=at_least(2))
    grad_accum: int = option(
        1, "micro-batches of --batch per step, their gradients averaged", rule=at_least(1)
    )
    lr: float = option(AdamW.lr, "peak learning rate, reached after the warm-up", rule=finite_from(0.0))
    lr_scheduler: str = option(
        "linear", "the rate after the warm-up: to 0 linearly, to 0 along a cosine, or held", choices=SCHEDULES
    )
    warmup_steps: int | None = option(
        None, "linear warm-up steps from a rate of 0 (default: a tenth of --steps)", rule=at_least(0)
    )
    weight_decay: float = option(AdamW.weight_decay, "AdamW's decoupled weight decay", rule=finite_from(0.0))
    max_grad_norm: float = option(
        1.0, "clip the gradients' total 2-norm to this (0: no clipping)", rule=finite_from(0.0)
    )
    precision: str = option(
        "fp32",
        "torch.autocast over float32 master weights (bf16-mixed, fp16-mixed with dynamic loss scaling)",
        choices=tuple(PRECISIONS),
    )
    recompute: str = option(
        "none",
        "activation recompute in the backward: full keeps each decoder layer's input alone and computes the "
        "layer again (Hugging Face's gradient checkpointing), selective keeps its products (MatMul, attention) "
        "and computes the rest again; the gradients do not change",
        choices=RECOMPUTE_MODES,
        resume="command",
    )
    recompute_layers: int | None = option(
        None,
        "with --recompute, the first this many decoder layers (default: all)",
        rule=at_least(0),
        resume="command",
    )
    loss_chunk_size: int | None = option(
        None,
        "the cross-entropy over chunks of this many tokens, their logits computed again in the backward, so that "
        "the whole [tokens, vocabulary] logits never exist (default: one chunk)",
        rule=at_least(1),
        resume="command",
    )
    loss_on: str = option(
        "assistant",
        "with chat examples (.jsonl of 'messages', or 'prompt' and 'completion'), the tokens the loss is taken on: "
        "the assistant's (the completion's), as TRL's assistant_only_loss, or all of them",
        choices=LOSS_ON,
        resume="run",
    )
    pack: bool = option(
        False,
        "several examples (or documents) in each --seq window, each attending to itself alone with its positions "
        "from 0 (FlashAttentionScore over their lengths, no [seq, seq] mask), instead of one example a padded row "
        "(or windows across documents)",
    )
    lora_r: int | None = option(
        None,
        "train LoRA adapters of this rank (PEFT's LoraConfig r) on the frozen weights of a Hugging Face directory, "
        "written to --out as a PEFT adapter directory (default: train every weight)",
        rule=at_least(1),
    )
    lora_alpha: int | None = option(
        None,
        "LoRA's scale numerator: the update is alpha / r times B A (PEFT's default: 8)",
        rule=at_least(1),
    )
    lora_dropout: float | None = option(
        None,
        "dropout on the LoRA branch's input (PEFT's default: 0)",
        rule=Rule(lambda v: 0.0 <= v < 1.0, "in [0, 1)"),
    )
    lora_target: tuple[str, ...] | None = option(
        None,
        "the modules that take adapters: names (or name suffixes) of linear layers, or all-linear "
        "(PEFT's default: its choice for the architecture, q_proj and v_proj for Llama)",
        many=True,
    )
    adapter: str | None = option(
        None,
        "a PEFT adapter directory (adapter_config.json, adapter_model.safetensors) of this model to go on "
        "training; its r, alpha, dropout and targets, which --lora-* options must not contradict",
    )
    merge: bool = option(
        False,
        "with LoRA, also write the base model with the adapters merged into its weights as a Hugging Face "
        "directory in --out/merged",
        resume="command",
    )
    out: str = option(
        "train-output",
        "the run's folder: artifacts, checkpoint, losses.csv, the loss curve (and the trained Hugging Face "
        "directory); one run at a time, never the input model's folder",
        rule=Rule(lambda v: bool(str(v).strip()), "a folder's path, not empty"),
        resume="command",
    )
    resume: bool = option(
        False, "go on with the run in --out (options not given take the run's)", resume="command"
    )
    overwrite: bool = option(
        False, "replace the run (or model directory) in --out with a new one", resume="command"
    )
    save_every: int = option(
        100,
        "checkpoint every this many steps (0: only after the last step and when interrupted)",
        rule=at_least(0),
        resume="run",
    )
    eval_every: int = option(
        50,
        "held-out loss every this many steps (0: only after the last step)",
        rule=at_least(0),
        resume="run",
    )
    eval_batches: int = option(
        4, "held-out windows of --batch sequences per evaluation", rule=at_least(1), resume="run"
    )
    seed: int = option(0, "seed of the windows' positions in the data", rule=at_least(0))
    threads: int = option(
        0,
        "intra-op threads (0: ONNX Runtime's default, or under torchrun the cores per process)",
        rule=at_least(0),
        resume="command",
    )
    device: str = option(
        "cpu",
        "where the steps run: cpu, or an Ascend NPU (npu, npu:N) through onnxruntime-cann, the parameters, "
        "gradients and optimizer states in its memory; the first steps print where every node ran and what "
        "crossed the bus",
        rule=Rule(_is_device, "cpu, npu or npu:N"),
        resume="command",
    )
    zero: int = option(
        0,
        "under torchrun, 1 shards the AdamW states over the processes (ZeRO stage 1)",
        choices=(0, 1),
        resume="command",
    )
    collective_timeout: float = option(
        COLLECTIVE_TIMEOUT,
        "under torchrun, seconds a collective waits for a stalled process before failing (a killed one fails it at once)",
        rule=finite_from(0.0, included=False),
        resume="command",
    )
    given: frozenset[str] | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.model is None:
            raise SettingsError("train: a model is needed (an ONNX export or a Hugging Face directory)")
        for field in options():
            value, meta = getattr(self, field.name), field.metadata
            if value is None:
                continue
            if meta["choices"] is not None and value not in meta["choices"]:
                raise SettingsError(
                    f"{flag(field.name)} must be one of {', '.join(map(str, meta['choices']))}, got {value!r}"
                )
            if meta["rule"] is not None and not meta["rule"].holds(value):
                raise SettingsError(f"{flag(field.name)} must be {meta['rule'].says}, got {value!r}")
        lora = [n for n in ("lora_alpha", "lora_dropout", "lora_target") if getattr(self, n) is not None]
        if lora and self.lora_r is None and self.adapter is None:
            raise SettingsError(f"{flag(lora[0])} sets up LoRA, which needs --lora-r (or --adapter)")
        if self.merge and self.lora_r is None and self.adapter is None:
            raise SettingsError(
                "--merge merges LoRA adapters into the model, which needs --lora-r (or --adapter)"
            )
        if self.warmup_steps is not None and self.warmup_steps > self.steps:
            raise SettingsError(
                f"--warmup-steps must be at most --steps ({self.steps}), got {self.warmup_steps}"
            )

    @property
    def lora(self) -> bool:
        return self.lora_r is not None or self.adapter is not None

    @property
    def warmup(self) -> int:
        """The warm-up's steps: ``--warmup-steps``, else a tenth of the steps."""
        return self.steps // 10 if self.warmup_steps is None else self.warmup_steps

    @property
    def folder(self) -> Path:
        return Path(self.out)

    def was_given(self, name: str) -> bool:
        return self.given is None or name in self.given

    def recorded(self, processes: int = 1) -> dict[str, typing.Any]:
        """The run's options as a run records them: the warm-up as the steps it took, and the
        ``processes`` that each take ``--batch`` sequences of a step."""
        values = {f.name: getattr(self, f.name) for f in options() if f.metadata["resume"] != "command"}
        values["warmup_steps"] = self.warmup
        for field in options():
            if field.metadata["many"] and field.name in values and values[field.name] is not None:
                values[field.name] = list(values[field.name])
        values["processes"] = processes
        return values

    def resuming(self, recorded: Mapping[str, typing.Any], where: str, processes: int = 1) -> Settings:
        """These settings going on, in ``processes``, with a run that recorded ``recorded``: the
        options not given take the run's; a ``"same"`` option given otherwise is a
        ``SettingsError``. ``--batch`` is each process's share of a step: what must stay is the
        step's sequences over every process."""
        taken: dict[str, typing.Any] = {}
        ours = self.recorded(processes)
        for field in options():
            name, kind = field.name, field.metadata["resume"]
            if kind == "command" or name not in recorded:
                continue
            theirs = recorded[name]
            if name == "batch":
                taken |= self._batch_of(theirs * int(recorded.get("processes", 1)), processes, where)
            elif not self.was_given(name):
                taken[name] = tuple(theirs) if field.metadata["many"] and theirs is not None else theirs
            elif kind == "same" and ours[name] != theirs:
                raise SettingsError(
                    f"{flag(name)} {ours[name]} cannot resume {where}, whose run was trained with {flag(name)} "
                    f"{theirs} (leave {flag(name)} out to take the run's)"
                )
        try:
            return dataclasses.replace(self, **taken) if taken else self
        except SettingsError as error:
            raise SettingsError(
                f"{error}, resuming {where} with the run's options where none were given"
            ) from None

    def _batch_of(self, sequences: int, processes: int, where: str) -> dict[str, int]:
        """``--batch`` for ``processes`` resuming a run of ``sequences`` a step."""
        if self.was_given("batch"):
            if self.batch * processes != sequences:
                raise SettingsError(
                    f"--batch {self.batch} on {processes} process(es) ({self.batch * processes} sequences a step) "
                    f"cannot resume {where}, whose run took {sequences} a step (leave --batch out to take the run's)"
                )
            return {}
        if sequences % processes:
            raise SettingsError(
                f"the run in {where} took {sequences} sequences a step, which {processes} processes cannot share "
                "alike: resume it on a number of processes that divides it"
            )
        return {"batch": sequences // processes}


def options() -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(Settings) if f.name != "given"]


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _type_of(field: dataclasses.Field) -> type:
    """The type a command-line value converts to: the field's own, its optional's or its
    sequence's item type."""
    hint = typing.get_type_hints(Settings)[field.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    while args:
        hint, args = args[0], [a for a in typing.get_args(args[0]) if a is not Ellipsis]
    return hint


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``Settings``' options on ``parser``, whose namespace then holds only the options given
    (``from_arguments`` adds the defaults)."""
    for field in options():
        meta, kind = field.metadata, _type_of(field)
        text = meta["help"]
        if meta["rule"] is not None:
            text += f"; {meta['rule'].says}"
        if field.default is not None and kind is not bool:
            text += f" (default: {field.default})"
        if meta["positional"]:
            parser.add_argument(field.name, help=text)
        elif kind is bool:
            parser.add_argument(flag(field.name), action="store_true", default=argparse.SUPPRESS, help=text)
        else:
            parser.add_argument(
                flag(field.name),
                type=kind,
                choices=meta["choices"],
                nargs="+" if meta["many"] else None,
                default=argparse.SUPPRESS,
                metavar=None if meta["choices"] else field.name.upper(),
                help=text,
            )


def from_arguments(namespace: argparse.Namespace) -> Settings:
    """The settings of a parsed command line (``add_arguments``): the options given, the
    defaults for the rest."""
    names = {f.name for f in options()}
    given = {name: value for name, value in vars(namespace).items() if name in names}
    for field in options():
        if field.metadata["many"] and given.get(field.name) is not None:
            given[field.name] = tuple(given[field.name])
    return Settings(**given, given=frozenset(given))
