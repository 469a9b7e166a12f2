"""The training loop of ``python -m ort_ascend_ops train`` and of the demo: a language model
(an ONNX export whose integer inputs all take the token window, as a Hugging Face causal LM's
``input_ids`` and ``labels`` do) trained on a byte corpus with AdamW and a linear schedule, in
float32 or mixed precision, gradients clipped to a norm, checkpointed every few steps and on
Ctrl-C, resumable bit for bit."""

from __future__ import annotations

import contextlib
import csv
import math
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from .api import CheckpointState, LinearLRScheduler, Module, Optimizer, clip_grad_norm_
from .artifacts import artifact_paths, generate_artifacts
from .data import ByteCorpus
from .optim import AdamW
from .precision import LOSS_SCALED, PRECISIONS

ARTIFACTS = "artifacts"
LOSSES_CSV = "losses.csv"
LOSS_CURVE = "loss_curve.png"
_COLUMNS = ("step", "loss", "eval_loss", "learning_rate", "grad_norm", "loss_scale", "skipped", "seconds")
# What a run records in its checkpoint and a resume must match.
_RECORDED = ("precision", "max_grad_norm")


class SettingsError(ValueError):
    """Settings that cannot run (or cannot resume the run in --out); the CLI exits with 2."""


@dataclass
class Settings:
    steps: int
    batch: int
    seq: int
    lr: float
    out: Path
    resume: bool = False
    save_every: int = 100
    eval_every: int = 50
    eval_batches: int = 4
    warmup: int | None = None  # default: a tenth of the steps
    seed: int = 0
    threads: int | None = None
    precision: str = "fp32"
    max_grad_norm: float = 1.0  # 0: no clipping

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise SettingsError(f"--precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if not self.max_grad_norm >= 0:
            raise SettingsError(
                f"--max-grad-norm must be >= 0 (0 turns clipping off), got {self.max_grad_norm}"
            )

    @property
    def warmup_steps(self) -> int:
        return self.steps // 10 if self.warmup is None else self.warmup


@dataclass
class History:
    """One row per step: the training loss, the held-out loss where evaluated, the learning
    rate the step used, the gradients' norm before clipping (when clipping), the loss scale it
    ran with and whether it was skipped (fp16-mixed) and the seconds it took."""

    rows: list[dict] = field(default_factory=list)

    def losses(self) -> list[float]:
        return [r["loss"] for r in self.rows]

    def evals(self) -> list[tuple[int, float]]:
        return [(r["step"], r["eval_loss"]) for r in self.rows if r["eval_loss"] is not None]

    def save(self, path: Path) -> None:
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, _COLUMNS)
            writer.writeheader()
            writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in self.rows)

    @classmethod
    def load(cls, path: Path, steps: int) -> History:
        """The rows of the first ``steps`` steps (a run killed after its last checkpoint wrote more)."""
        if not path.exists():
            return cls()
        with open(path, newline="") as f:
            rows: list[dict] = [
                {
                    "step": int(r["step"]),
                    "loss": float(r["loss"]),
                    "eval_loss": float(r["eval_loss"]) if r["eval_loss"] else None,
                    "learning_rate": float(r["learning_rate"]),
                    # Absent from the CSV of a run begun before these columns: no clipping, no scale.
                    "grad_norm": float(r["grad_norm"]) if r.get("grad_norm") else None,
                    "loss_scale": float(r.get("loss_scale") or 1.0),
                    "skipped": int(r.get("skipped") or 0),
                    "seconds": float(r["seconds"]),
                }
                for r in csv.DictReader(f)
            ]
        return cls([r for r in rows if r["step"] <= steps])


class _Interrupt:
    """Ctrl-C during training sets a flag: the loop saves after the current step and stops."""

    def __init__(self):
        self.requested = False

    def __enter__(self):
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        self.requested = True

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self._previous)


class _Progress:
    """One line redrawn in place on a terminal, else a line every tenth of the run."""

    def __init__(self, total: int, stream=sys.stdout):
        self.total, self.stream = total, stream
        self.tty = stream.isatty()
        self.start = time.perf_counter()

    def update(
        self, step: int, loss: float, tokens_per_s: float, eval_loss: float | None, scaling: str = ""
    ) -> None:
        width = 30
        filled = int(width * step / max(self.total, 1))
        bar = "#" * filled + "." * (width - filled)
        evaluated = f"  eval {eval_loss:.4f}" if eval_loss is not None else ""
        line = f"  [{bar}] {step:>5}/{self.total}  loss {loss:.4f}{evaluated}{scaling}  {tokens_per_s:,.0f} tokens/s"
        if self.tty:
            self.stream.write("\r" + line + "\033[K")
            if step == self.total:
                self.stream.write("\n")
        elif step == self.total or step % max(self.total // 10, 1) == 0 or eval_loss is not None:
            self.stream.write(line + "\n")
        self.stream.flush()


def _feeds(module: Module, window: np.ndarray) -> list[np.ndarray]:
    return [window for _ in module.input_names()]


def evaluate(module: Module, corpus: ByteCorpus, settings: Settings) -> float:
    """The mean loss over the same held-out windows every time."""
    module.eval()
    try:
        losses = [
            float(
                module(
                    *_feeds(module, corpus.batch("held_out", i, settings.batch, settings.seq, settings.seed))
                )
            )
            for i in range(settings.eval_batches)
        ]
    finally:
        module.train()
    return float(np.mean(losses))


def artifacts_for(model_path: Path, settings: Settings) -> dict[str, Path]:
    folder = settings.out / ARTIFACTS
    paths = artifact_paths(folder)
    if settings.resume and all(p.exists() for p in paths.values()):
        return paths
    return generate_artifacts(
        onnx.load(model_path),
        loss=None,
        optimizer=AdamW(lr=settings.lr),
        artifact_directory=folder,
        precision=settings.precision,
    )


def _check_resumable(state: CheckpointState, settings: Settings, checkpoint: Path) -> None:
    for name in _RECORDED:
        recorded, given = state.properties.get(name), getattr(settings, name)
        if recorded is not None and recorded != given:
            option = "--" + name.replace("_", "-")
            raise SettingsError(
                f"{option} {given} cannot resume {checkpoint}, whose run was trained with {option} {recorded}"
            )


def train(model_path: str | Path, corpus: ByteCorpus, settings: Settings, say=print) -> History:
    """Trains (or, with ``settings.resume``, goes on training) the model; returns every step's row."""
    out = settings.out
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = out / "checkpoint.safetensors"
    resuming = settings.resume and checkpoint.exists()
    if resuming:
        state = CheckpointState.load_checkpoint(checkpoint)
        _check_resumable(state, settings, checkpoint)
    paths = artifacts_for(Path(model_path), settings)
    if not resuming:
        state = CheckpointState.load_checkpoint(paths["checkpoint"])
    done = int(state.properties.get("step", 0))
    history = History.load(out / LOSSES_CSV, done) if resuming else History()
    module = Module(paths["training"], state, paths["eval"], threads=settings.threads)
    optimizer = Optimizer(paths["optimizer"], module)
    scheduler = LinearLRScheduler(optimizer, settings.warmup_steps, settings.steps, settings.lr)
    scaled = settings.precision in LOSS_SCALED
    clipping = f"clipped to norm {settings.max_grad_norm:g}" if settings.max_grad_norm else "not clipped"
    say(
        f"training {Path(model_path).name}: {sum(p.data.size for p in state.parameters.values()):,} parameters, "
        f"AdamW lr {settings.lr:g} (warm-up {settings.warmup_steps}, linear decay), batch {settings.batch} x "
        f"seq {settings.seq}, {settings.precision}"
        + (f" (loss scale {optimizer.get_loss_scale():g})" if scaled else "")
        + f", gradients {clipping}, steps {done + 1}..{settings.steps}"
        + (" (resumed)" if resuming else "")
    )

    def save(step: int) -> None:
        state.properties["step"] = step
        for name in _RECORDED:
            state.properties[name] = getattr(settings, name)
        CheckpointState.save_checkpoint(state, checkpoint, include_optimizer_state=True)
        history.save(out / LOSSES_CSV)

    progress = _Progress(settings.steps)
    tokens = settings.batch * settings.seq
    skipped = sum(r["skipped"] for r in history.rows)
    with _Interrupt() as interrupt:
        for step in range(done + 1, settings.steps + 1):
            window = corpus.batch("train", step, settings.batch, settings.seq, settings.seed)
            start = time.perf_counter()
            learning_rate, loss_scale = optimizer.get_learning_rate(), optimizer.get_loss_scale()
            loss = float(module(*_feeds(module, window)))
            norm = clip_grad_norm_(module, settings.max_grad_norm) if settings.max_grad_norm else None
            updated = optimizer.step()
            skipped += not updated
            scheduler.step()
            module.lazy_reset_grad()
            seconds = time.perf_counter() - start
            if not math.isfinite(loss) and not scaled:  # fp16-mixed skips such a step instead
                raise FloatingPointError(f"the loss is {loss} at step {step}")
            evaluated = step % settings.eval_every == 0 or step == settings.steps
            eval_loss = evaluate(module, corpus, settings) if evaluated else None
            history.rows.append(
                {
                    "step": step,
                    "loss": loss,
                    "eval_loss": eval_loss,
                    "learning_rate": learning_rate,
                    "grad_norm": norm,
                    "loss_scale": loss_scale,
                    "skipped": int(not updated),
                    "seconds": seconds,
                }
            )
            scaling = f"  scale {loss_scale:g}  skipped {skipped}" if scaled else ""
            progress.update(step, loss, tokens / seconds, eval_loss, scaling)
            if step % settings.save_every == 0 or step == settings.steps or interrupt.requested:
                save(step)
            if interrupt.requested:
                say(f"\ninterrupted: saved the checkpoint at step {step} to {checkpoint}; --resume goes on")
                break
    history.save(out / LOSSES_CSV)
    plot(history, out / LOSS_CURVE, say)
    return history


def plot(history: History, path: Path, say=print) -> bool:
    """The loss curve (training per step, held-out where evaluated) as a PNG, with matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say(
            f"no loss curve PNG: matplotlib is not installed (pip install matplotlib); the CSV is in {path.parent}"
        )
        return False
    figure, axes = plt.subplots(figsize=(7, 4), dpi=120)
    steps = [r["step"] for r in history.rows]
    axes.plot(steps, history.losses(), lw=0.8, label="training loss")
    evals = history.evals()
    if evals:
        axes.plot(*zip(*evals, strict=True), "o-", ms=3, label="held-out loss")
    skipped = [(r["step"], r["loss"]) for r in history.rows if r["skipped"]]
    if skipped:
        axes.plot(*zip(*skipped, strict=True), "rx", ms=5, label="skipped (gradients overflowed)")
    axes.axhline(math.log(256), color="gray", ls=":", lw=0.8, label="ln 256 (uniform over bytes)")
    if any(r["loss_scale"] != 1.0 for r in history.rows):  # fp16-mixed: the scale on its own axis
        scale_axes = axes.twinx()
        scale_axes.step(steps, [r["loss_scale"] for r in history.rows], "g-", lw=0.8, where="post")
        scale_axes.set_yscale("log", base=2)
        scale_axes.set_ylabel("loss scale", color="g")
    axes.set_xlabel("step")
    axes.set_ylabel("cross-entropy (nats per byte)")
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    figure.savefig(path)
    plt.close(figure)
    return True
