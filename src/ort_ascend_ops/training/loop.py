"""The training loop of ``python -m ort_ascend_ops train`` and of the demo: a language model (an
ONNX export whose integer inputs all take the token window, as a Hugging Face causal LM's
``input_ids`` and ``labels`` do, or a Hugging Face directory, exported here and written back at
the end) trained on a corpus of token ids with AdamW and a warm-up schedule, in float32 or mixed
precision, gradients accumulated over micro-batches and clipped to a norm, checkpointed every few
steps and on Ctrl-C, resumable bit for bit. Under ``torchrun`` every process trains its rows of
the global batch (``distributed``), rank 0 alone writing ``--out``; a worker torchrun restarts
after a failure goes on from the last checkpoint."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import math
import resource
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from . import distributed
from .api import ZERO_STAGES, CheckpointState, Module, Optimizer, clip_grad_norm_
from .artifacts import artifact_paths, generate_artifacts
from .checkpoint import read_properties
from .data import Corpus
from .hf_dir import HfModel
from .optim import AdamW
from .precision import LOSS_SCALED, PRECISIONS

ARTIFACTS = "artifacts"
LOSSES_CSV = "losses.csv"
LOSS_CURVE = "loss_curve.png"
_COLUMNS = ("step", "loss", "eval_loss", "learning_rate", "grad_norm", "loss_scale", "skipped", "seconds")
# What a run records in its checkpoint and a resume must match.
_RECORDED = ("precision", "max_grad_norm", "grad_accum", "lr_scheduler", "weight_decay")
# What every rank must give alike (beside the model and the data).
_AGREED = (*_RECORDED, "steps", "batch", "seq", "lr", "warmup", "seed", "save_every", "eval_every", "zero")
SCHEDULERS = ("linear", "cosine", "constant")


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
    threads: int | None = None  # None: ONNX Runtime's default, or the cores / processes on this machine
    precision: str = "fp32"
    max_grad_norm: float = 1.0  # 0: no clipping
    grad_accum: int = 1  # micro-batches of `batch` sequences per step, their gradients averaged
    lr_scheduler: str = "linear"  # after the warm-up: linear decay to 0, cosine to 0, or constant
    weight_decay: float = 0.01  # AdamW's, torch's default
    zero: int = 0  # 1: each rank holds the optimizer states of 1/N of the parameters (ZeRO stage 1)
    # Seconds a collective waits for a stalled rank.
    collective_timeout: float = distributed.COLLECTIVE_TIMEOUT

    def __post_init__(self):
        if self.zero not in ZERO_STAGES:
            raise SettingsError(f"--zero must be one of {ZERO_STAGES}, got {self.zero}")
        if not self.collective_timeout > 0:
            raise SettingsError(f"--collective-timeout must be positive, got {self.collective_timeout}")
        if self.lr_scheduler not in SCHEDULERS:
            raise SettingsError(
                f"--lr-scheduler must be one of {', '.join(SCHEDULERS)}, got {self.lr_scheduler!r}"
            )
        for option, value in (
            ("--grad-accum", self.grad_accum),
            ("--batch", self.batch),
            ("--seq", self.seq),
        ):
            if value < 1:
                raise SettingsError(f"{option} must be at least 1, got {value}")
        if not self.weight_decay >= 0:
            raise SettingsError(f"--weight-decay must be >= 0, got {self.weight_decay}")
        if self.warmup is not None and not 0 <= self.warmup <= self.steps:
            raise SettingsError(
                f"--warmup-steps must be between 0 and --steps ({self.steps}), got {self.warmup}"
            )
        if self.precision not in PRECISIONS:
            raise SettingsError(f"--precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if not self.max_grad_norm >= 0:
            raise SettingsError(
                f"--max-grad-norm must be >= 0 (0 turns clipping off), got {self.max_grad_norm}"
            )

    @property
    def warmup_steps(self) -> int:
        return self.steps // 10 if self.warmup is None else self.warmup

    def learning_rate(self, step: int) -> float:
        """The rate of the step after ``step`` steps: linear warm-up from 0, then the scheduler's
        curve to the last step (as transformers' get_{linear,cosine,constant}_schedule_with_warmup)."""
        if step < self.warmup_steps:
            return self.lr * step / max(1, self.warmup_steps)
        if self.lr_scheduler == "constant":
            return self.lr
        decaying = max(1, self.steps - self.warmup_steps)
        if self.lr_scheduler == "cosine":
            progress = (step - self.warmup_steps) / decaying
            return self.lr * max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
        return self.lr * max(0.0, (self.steps - step) / decaying)  # LinearLRScheduler's arithmetic


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
        self,
        step: int,
        loss: float,
        tokens_per_s: float,
        eval_loss: float | None,
        scaling: str = "",
        learning_rate: float | None = None,
    ) -> None:
        width = 30
        filled = int(width * step / max(self.total, 1))
        bar = "#" * filled + "." * (width - filled)
        evaluated = f"  eval {eval_loss:.4f}" if eval_loss is not None else ""
        rate = f"  lr {learning_rate:.2e}" if learning_rate is not None else ""
        line = (
            f"  [{bar}] {step:>5}/{self.total}  loss {loss:.4f}{evaluated}{scaling}{rate}  "
            f"{tokens_per_s:,.0f} tokens/s  peak {peak_rss_mb():,.0f} MB"
        )
        if self.tty:
            self.stream.write("\r" + line + "\033[K")
            if step == self.total:
                self.stream.write("\n")
        elif step == self.total or step % max(self.total // 10, 1) == 0 or eval_loss is not None:
            self.stream.write(line + "\n")
        self.stream.flush()


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summary(history: History, settings: Settings, ranks: int = 1) -> str:
    """The run on one screen: steps, tokens (of all ``ranks``), time, losses, the best held-out
    loss and where the results are."""
    if not history.rows:
        return f"nothing to train: the run in {settings.out} has done its {settings.steps} steps"
    first, last = history.rows[0], history.rows[-1]
    steps = len(history.rows)
    tokens = steps * _tokens_per_step(settings, ranks)
    seconds = sum(r["seconds"] for r in history.rows)
    evals = history.evals()
    best = min(evals, key=lambda e: e[1]) if evals else None
    processes = f" by {ranks} processes" if ranks > 1 else ""
    lines = [
        f"trained steps {first['step']}..{last['step']}: {tokens:,} tokens{processes} in {seconds:,.2f} s "
        f"({tokens / max(seconds, 1e-9):,.0f} tokens/s), peak memory {peak_rss_mb():,.0f} MB"
        + (" (rank 0)" if ranks > 1 else ""),
        f"loss {first['loss']:.4f} (step {first['step']}) -> {last['loss']:.4f} (step {last['step']})",
    ]
    if best is not None:
        lines.append(f"best held-out loss {best[1]:.4f} at step {best[0]}")
    skipped = sum(r["skipped"] for r in history.rows)
    if skipped:
        lines.append(f"skipped steps (fp16 overflow): {skipped}")
    curve = f", {LOSS_CURVE}" if (settings.out / LOSS_CURVE).exists() else ""
    lines.append(
        f"wrote {settings.out}: {LOSSES_CSV}{curve}, checkpoint.safetensors (--resume goes on), {ARTIFACTS}/"
    )
    return "\n".join(lines)


def _tokens_per_step(settings: Settings, ranks: int) -> int:
    return settings.batch * settings.seq * settings.grad_accum * ranks


def _feeds(module: Module, window: np.ndarray) -> list[np.ndarray]:
    return [window for _ in module.input_names()]


def _rows(module: Module, corpus: Corpus, split: str, index: int, settings: Settings) -> np.ndarray:
    """This rank's rows ``[r*b, (r+1)*b)`` of the global batch one process of ``--batch N*b``
    takes (all of it in one process)."""
    ranks = module.ranks
    if ranks is None:
        return corpus.batch(split, index, settings.batch, settings.seq, settings.seed)
    window = corpus.batch(split, index, settings.batch * ranks.size, settings.seq, settings.seed)
    return window[ranks.rank * settings.batch : (ranks.rank + 1) * settings.batch]


def _mean_over_ranks(module: Module, values: list[float], what: str) -> list[float]:
    return values if module.ranks is None else module.ranks.mean(values, what)


def evaluate(module: Module, corpus: Corpus, settings: Settings) -> float:
    """The mean loss over the same held-out windows every time (over every rank's rows)."""
    module.eval()
    try:
        losses = [
            float(module(*_feeds(module, _rows(module, corpus, "held_out", i, settings))))
            for i in range(settings.eval_batches)
        ]
    finally:
        module.train()
    return _mean_over_ranks(module, [float(np.mean(losses))], "the held-out loss's all-reduce")[0]


Model = Path | HfModel  # an ONNX export, or a Hugging Face directory's model


def _name(model: Model) -> str:
    return model.directory.name if isinstance(model, HfModel) else Path(model).name


def _identity(model: Model) -> str:
    if isinstance(model, HfModel):
        return model.identity
    with open(model, "rb") as f:
        return f"{Path(model).name} sha256 {hashlib.file_digest(f, 'sha256').hexdigest()[:16]}"


def _takes(paths: dict[str, Path], batch: int, seq: int) -> bool:
    """Whether the training model's integer inputs take ``[batch, seq]`` (an export of a fixed
    batch does not take another)."""
    graph = onnx.load(paths["training"], load_external_data=False).graph
    for value in graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.type.tensor_type.elem_type == onnx.TensorProto.INT64 and len(dims) == 2:
            if any(
                d.HasField("dim_value") and d.dim_value != n for d, n in zip(dims, (batch, seq), strict=True)
            ):
                return False
    return True


def artifacts_for(model: Model, settings: Settings, folder: Path | None = None) -> dict[str, Path]:
    folder = folder or settings.out / ARTIFACTS
    paths = artifact_paths(folder)
    if (
        settings.resume
        and all(p.exists() for p in paths.values())
        and _takes(paths, settings.batch, settings.seq)
    ):
        return paths
    exported = model.export(settings.batch, settings.seq) if isinstance(model, HfModel) else onnx.load(model)
    return generate_artifacts(
        exported,
        loss=None,
        optimizer=AdamW(lr=settings.lr, weight_decay=settings.weight_decay),
        artifact_directory=folder,
        precision=settings.precision,
    )


def _check_out(model: Model, settings: Settings, checkpoint: Path) -> None:
    """Refuses an --out whose checkpoint is another model's run: neither resumed nor overwritten."""
    if not checkpoint.exists() or not isinstance(model, HfModel):
        return
    recorded = read_properties(checkpoint).get("model")
    if recorded is not None and recorded != model.identity:
        raise SettingsError(
            f"--out {settings.out} holds the run of another model ({recorded}; this one is {model.identity}): "
            "choose another --out"
        )


def _check_resumable(state: CheckpointState, settings: Settings, checkpoint: Path) -> None:
    for name in _RECORDED:
        recorded, given = state.properties.get(name), getattr(settings, name)
        if recorded is not None and recorded != given:
            option = "--" + name.replace("_", "-")
            raise SettingsError(
                f"{option} {given} cannot resume {checkpoint}, whose run was trained with {option} {recorded}"
            )


def _check(model: Model, corpus: Corpus, settings: Settings, checkpoint: Path, rank0: bool):
    """The run's own checks; on rank 0 the checkpoint to resume (None for a fresh start)."""
    try:
        corpus.check_window(settings.seq)
    except ValueError as e:
        raise SettingsError(str(e)) from None
    if isinstance(model, HfModel) and corpus.vocabulary_needed() > model.vocab_size:
        raise SettingsError(
            f"the data's token ids reach {corpus.vocabulary_needed() - 1}, past {model.directory}'s vocabulary "
            f"of {model.vocab_size}"
        )
    if not rank0:
        return None
    _check_out(model, settings, checkpoint)
    settings.out.mkdir(parents=True, exist_ok=True)
    if not (settings.resume and checkpoint.exists()):
        return None
    state = CheckpointState.load_checkpoint(checkpoint)
    _check_resumable(state, settings, checkpoint)
    return state


def _start(model: Model, corpus: Corpus, settings: Settings, checkpoint: Path, ranks):
    """``_check``'s result, the ranks agreeing first that each passed its checks and that they
    run the same model, data and settings."""
    rank0 = ranks is None or ranks.rank == 0
    if ranks is None:
        return _check(model, corpus, settings, checkpoint, rank0)
    state, error = None, None
    try:
        state = _check(model, corpus, settings, checkpoint, rank0)
    except (SettingsError, ValueError, OSError) as e:
        error = str(e)
    data = hashlib.sha256(corpus.train.tobytes() + corpus.held_out.tobytes()).hexdigest()[:16]
    facts = {"the model": _identity(model), "the data": f"{corpus.describe()} sha256 {data}"}
    facts |= {"--" + n.replace("_", "-"): str(getattr(settings, n)) for n in _AGREED}
    facts |= distributed.versions()
    ranks.agree(facts, error)
    return state


def train(model: str | Path | HfModel, corpus: Corpus, settings: Settings, say=print) -> History:
    """Trains (or, with ``settings.resume``, goes on training) the model; returns every step's row.
    A Hugging Face model's directory is written into ``settings.out`` at the end. Under torchrun,
    rank r trains its rows of each global batch; rank 0 alone writes (and says) anything."""
    model = model if isinstance(model, HfModel) else Path(model)
    ranks = distributed.join(settings.collective_timeout)
    rank0 = ranks is None or ranks.rank == 0
    world = 1 if ranks is None else ranks.size
    if not rank0:
        say = _silent
    if distributed.restarted():  # torchrun's restart after a failure goes on from the checkpoint
        settings = dataclasses.replace(settings, resume=True)
        say(f"torchrun restarted the processes (restart {distributed.restarted()}): resuming {settings.out}")
    out = settings.out
    checkpoint = out / "checkpoint.safetensors"
    resumed = _start(model, corpus, settings, checkpoint, ranks)
    with tempfile.TemporaryDirectory(prefix="ort_ascend_ops-rank-") as own:
        # Only rank 0 writes --out: the other ranks' artifacts are their own, deleted at the end.
        paths = artifacts_for(model, settings, None if rank0 else Path(own))
        say(f"artifacts in {paths['training'].parent} (peak memory so far {peak_rss_mb():,.0f} MB)")
        state = resumed or CheckpointState.load_checkpoint(paths["checkpoint"])
        # ONNX Runtime's default is every core: under torchrun each process takes its share.
        threads = settings.threads or (None if ranks is None else distributed.threads_per_process())
        module = Module(paths["training"], state, paths["eval"], threads=threads)
        optimizer = Optimizer(paths["optimizer"], module, zero=settings.zero)
        return _run(model, corpus, settings, module, optimizer, resumed is not None, say, world)


def _silent(*args, **kwargs) -> None:
    pass


def _run(model, corpus, settings, module, optimizer, resuming, say, world) -> History:
    state, out = module._state, settings.out
    checkpoint = out / "checkpoint.safetensors"
    rank0 = module.ranks is None or module.ranks.rank == 0
    done = int(state.properties.get("step", 0))  # rank 0's, as the module took it
    history = History.load(out / LOSSES_CSV, done) if resuming and rank0 else History()
    optimizer.set_learning_rate(settings.learning_rate(optimizer.step_count))
    scaled = settings.precision in LOSS_SCALED
    clipping = f"clipped to norm {settings.max_grad_norm:g}" if settings.max_grad_norm else "not clipped"
    say(
        f"training {_name(model)}: {sum(p.data.size for p in state.parameters.values()):,} parameters"
        + (f" (stored as {model.dtype}, trained in float32 masters)" if isinstance(model, HfModel) else "")
        + f", AdamW lr {settings.lr:g} weight decay {settings.weight_decay:g} (warm-up {settings.warmup_steps}, "
        f"{settings.lr_scheduler} after), batch {settings.batch} x seq {settings.seq}"
        + (f" x {settings.grad_accum} micro-batches" if settings.grad_accum > 1 else "")
        + (f" on each of {world} processes" if world > 1 else "")
        + (" (ZeRO-1: optimizer states sharded)" if optimizer.zero else "")
        + f", {settings.precision}"
        + (f" (loss scale {optimizer.get_loss_scale():g})" if scaled else "")
        + f", gradients {clipping}, steps {done + 1}..{settings.steps}"
        + (" (resumed)" if resuming else "")
    )

    def save(step: int) -> None:
        state.properties["step"] = step
        for name in _RECORDED:
            state.properties[name] = getattr(settings, name)
        if isinstance(model, HfModel):
            state.properties["model"] = model.identity
        with optimizer.consolidated():  # every rank takes part; rank 0 writes
            if not rank0:
                return
            try:
                CheckpointState.save_checkpoint(state, checkpoint, include_optimizer_state=True)
                history.save(out / LOSSES_CSV)
            except OSError as e:  # a full disk, a file-size limit: the last checkpoint is written atomically
                raise SettingsError(
                    f"writing the checkpoint of step {step} to {checkpoint} failed ({e.strerror or e}); "
                    f"{_intact(checkpoint)}; free space and go on with --resume"
                ) from None

    progress = _Progress(settings.steps) if rank0 else None
    tokens = _tokens_per_step(settings, world)
    skipped = sum(r["skipped"] for r in history.rows)
    stopping = False
    with _Interrupt() as interrupt:
        for step in range(done + 1, settings.steps + 1):
            start = time.perf_counter()
            learning_rate, loss_scale = optimizer.get_learning_rate(), optimizer.get_loss_scale()
            loss = _accumulated_loss(module, corpus, settings, step)
            # One all-reduce: the step's loss over the ranks, and whether any rank saw Ctrl-C.
            loss, stop = _mean_over_ranks(module, [loss, float(interrupt.requested)], "the loss's all-reduce")
            stopping = stop > 0
            norm = clip_grad_norm_(module, settings.max_grad_norm) if settings.max_grad_norm else None
            updated = optimizer.step()
            skipped += not updated
            optimizer.set_learning_rate(settings.learning_rate(optimizer.step_count))
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
            if progress is not None:
                progress.update(step, loss, tokens / seconds, eval_loss, scaling, learning_rate)
            if step % settings.save_every == 0 or step == settings.steps or stopping:
                save(step)
            if stopping:
                say(f"\ninterrupted: saved the checkpoint at step {step} to {checkpoint}; --resume goes on")
                break
    if not rank0:
        return history
    history.save(out / LOSSES_CSV)
    plot(history, out / LOSS_CURVE, say, model.vocab_size if isinstance(model, HfModel) else 256)
    if isinstance(model, HfModel) and not stopping:
        try:
            written = model.save({n: p.view() for n, p in state.parameters.items()}, out)
        except OSError as e:
            raise SettingsError(
                f"writing the Hugging Face model into {out} failed ({e.strerror or e}); {_intact(checkpoint)}, "
                "and --resume writes the model again"
            ) from None
        say(
            f"wrote the Hugging Face model to {out} ({', '.join(written)}): AutoModelForCausalLM.from_pretrained loads it"
        )
    return history


def _intact(checkpoint: Path) -> str:
    if not checkpoint.exists():
        return "no checkpoint was written before"
    step = read_properties(checkpoint).get("step", 0)
    return f"the checkpoint of step {step} in {checkpoint} is intact"


def _accumulated_loss(module: Module, corpus: Corpus, settings: Settings, step: int) -> float:
    """The step's mean loss over its micro-batches, their gradients accumulated and averaged as
    transformers' Trainer averages them (each micro-batch's loss divided by their count), and
    averaged over the ranks on the last one alone (``no_sync`` before it). Micro-batch k of step
    s reads window (s - 1) * grad_accum + k + 1: with one micro-batch, window s."""
    n = settings.grad_accum
    losses = []
    for k in range(n):
        window = _rows(module, corpus, "train", (step - 1) * n + k + 1, settings)
        with module.no_sync() if k < n - 1 else contextlib.nullcontext():
            losses.append(float(module(*_feeds(module, window))))
    if n > 1:
        module.scale_grads(1.0 / n)
    return float(np.mean(losses))


def plot(history: History, path: Path, say=print, vocabulary: int = 256) -> bool:
    """The loss curve (training per step, held-out where evaluated) as a PNG, with matplotlib;
    ``vocabulary``: the model's, whose uniform distribution's loss is drawn for scale."""
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
    axes.axhline(
        math.log(vocabulary),
        color="gray",
        ls=":",
        lw=0.8,
        label=f"ln {vocabulary} (uniform over the vocabulary)",
    )
    if any(r["loss_scale"] != 1.0 for r in history.rows):  # fp16-mixed: the scale on its own axis
        scale_axes = axes.twinx()
        scale_axes.step(steps, [r["loss_scale"] for r in history.rows], "g-", lw=0.8, where="post")
        scale_axes.set_yscale("log", base=2)
        scale_axes.set_ylabel("loss scale", color="g")
    axes.set_xlabel("step")
    axes.set_ylabel("cross-entropy (nats per token)")
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    figure.savefig(path)
    plt.close(figure)
    return True
