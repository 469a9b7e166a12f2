"""The training loop of ``python -m ort_ascend_ops train`` and of the demo: a ``ModelSource`` (an
ONNX export, or a Hugging Face directory written back at the end) trained on a corpus of token ids
with AdamW and a warm-up schedule, in float32 or mixed precision, gradients accumulated over
micro-batches and clipped to a norm, checkpointed every few steps and on SIGINT or SIGTERM,
resumable bit for bit. Every input is checked before anything is written. Under ``torchrun``
every process trains its rows of the global batch (``DataParallel``), rank 0 alone writing
``--out``; a worker torchrun restarts after a failure goes on from the last checkpoint."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

from ..autodiff.recompute import memory_options, recorded_memory_options
from ..cann_ep.step_report import FirstSteps
from ..training.api import CheckpointState, DataParallel, LRScheduler, Module, Optimizer, clip_grad_norm_
from ..training.api.data_parallel import Launch, versions
from ..training.api.device_memory import DeviceMemory
from ..training.artifacts import artifact_paths, generate_artifacts
from ..training.optim import AdamW
from .chat_data import Examples, is_examples
from .data import LABELS, Corpus, DataError, Rows
from .history import History, HistoryError
from .model_source import ModelError, ModelSource, at_run_shape, fixed_elsewhere, open_model
from .report import Progress, peak_rss_mb, plot, summary
from .run_folder import RunFolder
from .settings import Settings, SettingsError, flag, options

Say = Callable[[str], None]


class TrainingError(RuntimeError):
    """A run that cannot go on (its loss diverged); the CLI exits with 1."""


@dataclasses.dataclass
class Outcome:
    """A finished (or interrupted) run: its rows, the settings it ran with, its corpus, the
    processes that trained it, the signal that stopped it early (None: it ran to the end) and the
    files it wrote into ``--out``."""

    history: History
    settings: Settings
    corpus: Corpus | Examples
    processes: int = 1
    stopped_by: int | None = None
    written: list[str] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        s = self.settings
        tokens = s.batch * s.seq * s.grad_accum * self.processes
        return summary(self.history, tokens, self.processes, s.folder, s.steps, self.written)


class _Signals:
    """SIGINT (Ctrl-C) and SIGTERM (torchrun's and batch schedulers' stop) set a flag: the loop
    saves after the current step and stops. A second one stops at once."""

    def __init__(self):
        self.received: int | None = None

    def __enter__(self):
        self._previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _handle(self, signum, frame):
        if self.received is not None:
            self.__exit__()
            signal.raise_signal(signum)
        self.received = signum

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            signal.signal(s, handler)


def _silent(text: str) -> None:
    pass


def _print(text: str) -> None:
    print(text, flush=True)  # a supervisor reading a pipe sees each line as it comes


def train(settings: Settings, say: Say = _print) -> Outcome:
    """Trains (or, with ``settings.resume``, goes on training) the model of ``settings``; returns
    the run's ``Outcome``. Under torchrun, rank r trains its rows of each global batch; rank 0
    alone writes (and says) anything."""
    parallel = DataParallel.join(settings.collective_timeout)
    rank0 = parallel is None or parallel.rank == 0
    say = say if rank0 else _silent
    if settings.zero and parallel is None:
        raise SettingsError(
            "--zero 1 shards the optimizer states over torchrun's processes; this is one process"
        )
    restarts = Launch.from_environment().restarts
    if restarts:  # torchrun's restart after a failure goes on from the checkpoint
        settings = dataclasses.replace(settings, resume=True)
        say(f"torchrun restarted the processes (restart {restarts}): resuming {settings.out}")
    folder = RunFolder(settings.folder)
    source, corpus, settings = _checked(settings, folder, parallel, say)
    with _Signals() as signals, tempfile.TemporaryDirectory(prefix="ort_ascend_ops-rank-") as own:
        refused = None
        if rank0:
            try:
                folder.claim(source, settings, 1 if parallel is None else parallel.size)
            except SettingsError as error:
                refused = error
        if parallel is not None:  # every rank stops with rank 0's refusal, or none does
            said = parallel.from_rank0(None if refused is None else str(refused), "the run folder's claim")
            refused = SettingsError(said) if said is not None else None
        if refused is not None:
            raise refused
        try:
            return _train(source, corpus, settings, folder, parallel, signals, Path(own), say)
        finally:
            folder.release()


def _checked(settings: Settings, folder: RunFolder, parallel: DataParallel | None, say: Say):
    """The model, the corpus and the settings the run goes on with (a resumed run's), every input
    checked first, cheapest first; under torchrun on every rank, which then agree that each
    passed and that they run the same model, data and settings."""
    source = corpus = None
    error = None
    try:
        _check_device(settings, parallel)
        source = open_model(settings.model)
        settings = folder.check(source, settings, 1 if parallel is None else parallel.size)
        source.check(settings)
        source.load(say)
        corpus = _corpus(settings, source)
        say(f"data: {corpus.describe()}")
    except (SettingsError, ModelError, DataError, HistoryError) as e:
        if parallel is None:
            raise
        error = str(e)
    if parallel is not None:
        facts = {"the model": f"{source.kind} {source.identity}" if source else "none"}
        if corpus is not None:
            facts["the data"] = f"{corpus.describe()} sha256 {corpus.fingerprint()}"
        facts |= {
            flag(f.name): str(getattr(settings, f.name)) for f in options() if f.name not in ("model", "data")
        }
        parallel.agree(facts | versions(), error)
    return source, corpus, settings


def _check_device(settings: Settings, parallel: DataParallel | None) -> None:
    """``--device``: an NPU this ONNX Runtime reaches and that is there; under torchrun ``npu``,
    each rank its own (``_rank_device``)."""
    if settings.device == "cpu":
        return
    if parallel is not None and settings.device != "npu":
        raise SettingsError(
            f"--device {settings.device} under torchrun would put every rank on one NPU: pass --device npu "
            "and rank r takes npu:LOCAL_RANK, as torch_npu's ranks do"
        )
    device = _rank_device(settings, parallel)
    try:
        DeviceMemory(device).check()
    except (RuntimeError, ValueError) as error:
        raise SettingsError(f"--device {settings.device}: {error}") from None


def _rank_device(settings: Settings, parallel: DataParallel | None) -> str:
    """The device this process trains on: ``npu:LOCAL_RANK`` for ``--device npu`` under torchrun."""
    if parallel is None or settings.device == "cpu":
        return settings.device
    return f"npu:{parallel.launch.local_rank}"


def _corpus(settings: Settings, source: ModelSource) -> Corpus | Examples:
    tokenizer = source.tokenizer
    corpus: Corpus | Examples
    if settings.data and is_examples(settings.data):
        corpus = Examples.from_paths(
            settings.data, tokenizer, settings.seq, settings.loss_on, pack=settings.pack
        )
        if LABELS not in source.input_names():
            raise DataError(
                f"{corpus.description}: examples take the loss on some tokens alone, through the labels, and "
                f"{source.path} has no input '{LABELS}' (its inputs: {', '.join(source.input_names())})"
            )
    elif settings.data:
        corpus = Corpus.from_paths(settings.data, tokenizer=tokenizer)
    else:
        corpus = Corpus.python_stdlib(tokenizer=tokenizer)
    if settings.pack and isinstance(corpus, Corpus):
        corpus = corpus.per_document()
    corpus.check_window(settings.seq)
    if corpus.vocabulary_needed() > source.vocab_size:
        raise SettingsError(
            f"the data's token ids reach {corpus.vocabulary_needed() - 1}, past {source.path}'s vocabulary of "
            f"{source.vocab_size}"
        )
    return corpus


def _train(source, corpus, settings, folder: RunFolder, parallel, signals, own: Path, say: Say) -> Outcome:
    rank0 = parallel is None or parallel.rank == 0
    # Only rank 0 writes --out: the other ranks' artifacts are their own, deleted at the end.
    paths = artifact_paths(folder.artifacts if rank0 else own)
    if not (
        settings.resume and all(p.exists() for p in paths.values()) and _fits(paths["training"], settings)
    ):
        exported = source.export(settings)
        if settings.loss_chunk_size is not None:  # the chunks are cut when the graph is built
            exported = at_run_shape(exported, settings)
        paths = generate_artifacts(
            exported,
            loss=None,
            optimizer=AdamW(lr=settings.lr, weight_decay=settings.weight_decay),
            artifact_directory=paths["training"].parent,
            precision=settings.precision,
            recompute=settings.recompute,
            recompute_layers=settings.recompute_layers,
            loss_chunk_size=settings.loss_chunk_size,
        )
    say(f"artifacts in {paths['training'].parent} (peak memory so far {peak_rss_mb():,.0f} MB)")
    resumed = settings.resume and rank0 and folder.checkpoint.exists()
    device = _rank_device(settings, parallel)
    state = CheckpointState.load_checkpoint(
        folder.checkpoint if resumed else paths["checkpoint"], device=device
    )
    # ONNX Runtime's default is every core: under torchrun each process takes its share.
    threads = settings.threads or (None if parallel is None else parallel.launch.threads_per_process())
    npu = FirstSteps(own / "profile", threads) if settings.device != "cpu" else None
    module = Module(
        paths["training"],
        state,
        paths["eval"],
        device=device,
        threads=threads,
        process_group=parallel,
        session_options=npu.options["training"] if npu else None,
    )
    optimizer = Optimizer(
        paths["optimizer"],
        module,
        zero=settings.zero,
        session_options=npu.options["optimizer"] if npu else None,
    )
    scheduler = LRScheduler(optimizer, settings.lr_scheduler, settings.warmup, settings.steps, settings.lr)
    done = int(state.properties.get("step", 0))  # rank 0's, as the module took it
    history = folder.history() if rank0 and resumed else History()
    world = 1 if parallel is None else parallel.size
    outcome = Outcome(history, settings, corpus, world)
    say(
        f"training {source.path.name}: {_count(state, trained=True):,} parameters"
        + (f" (of {_count(state, trained=False):,})" if settings.lora else "")
        + source.describe()
        + f", AdamW lr {settings.lr:g} weight decay {settings.weight_decay:g} (warm-up {settings.warmup}, "
        f"{settings.lr_scheduler} after), batch {settings.batch} x seq {settings.seq}"
        + (f" x {settings.grad_accum} micro-batches" if settings.grad_accum > 1 else "")
        + (f" on each of {world} processes" if world > 1 else "")
        + (" (ZeRO-1: optimizer states sharded)" if optimizer.zero else "")
        + f", {settings.precision}"
        + (f" on {settings.device}" if npu else "")
        + (" (rank r on npu:LOCAL_RANK, gradients through HCCL)" if npu and world > 1 else "")
        + (f" (loss scale {optimizer.get_loss_scale():g})" if module.loss_scaler is not None else "")
        + f", gradients {f'clipped to norm {settings.max_grad_norm:g}' if settings.max_grad_norm else 'not clipped'}"
        + f", steps {done + 1}..{settings.steps}"
        + (" (resumed)" if resumed else "")
    )
    _steps(source, corpus, settings, folder, module, optimizer, scheduler, outcome, signals, done, say, npu)
    if not rank0:
        return outcome
    outcome.history.save(folder.losses)
    outcome.written = [folder.losses.name]
    if plot(outcome.history, folder.curve, say, source.vocab_size):
        outcome.written.append(folder.curve.name)
    outcome.written += [f"{folder.checkpoint.name} (--resume goes on)", f"{folder.artifacts.name}/"]
    if outcome.stopped_by is None and source.outputs(settings):
        try:
            written = source.write(state.host_parameters(), folder.path)
        except OSError as e:
            raise SettingsError(
                f"writing the Hugging Face model into {folder.path} failed ({e.strerror or e}); "
                f"{_intact(folder)}, and --resume writes the model again"
            ) from None
        outcome.written += written
        if settings.lora:
            say(
                f"wrote the LoRA adapter to {folder.path} ({', '.join(written)}): "
                f"peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained({str(source.path)!r}), "
                f"{str(folder.path)!r}) loads it"
                + (f"; the merged model is in {folder.path / 'merged'}" if settings.merge else "")
            )
        else:
            say(
                f"wrote the Hugging Face model to {folder.path} ({', '.join(written)}): AutoModelForCausalLM.from_pretrained loads it"
            )
    return outcome


def _count(state: CheckpointState, trained: bool) -> int:
    """The elements of the trained parameters (``trained=False``: of every parameter)."""
    values = [p for p in state.parameters.values() if p.requires_grad or not trained]
    return sum(int(np.prod(p.value.shape(), dtype=np.int64)) for p in values)


def _intact(folder: RunFolder) -> str:
    if not folder.checkpoint.exists():
        return "no checkpoint was written before"
    return f"the checkpoint of step {folder.saved_step()} in {folder.checkpoint} is intact"


def _fits(training: Path, settings: Settings) -> bool:
    """Whether the training model's token inputs take ``[--batch, --seq]`` (an export of fixed
    shapes, a Hugging Face directory's, takes no other: a run resumed on another number of
    processes exports again) and it was built with the command's --recompute and
    --loss-chunk-size (a resume may change them)."""
    model = onnx.load(training, load_external_data=False)
    tokens = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)
    if recorded_memory_options(model) != memory_options(
        settings.recompute, settings.recompute_layers, settings.loss_chunk_size
    ):
        return False
    return not any(
        fixed_elsewhere(v, settings) for v in model.graph.input if v.type.tensor_type.elem_type in tokens
    )


def _feeds(module: Module, rows: Rows) -> list[np.ndarray]:
    return rows.feeds(module.input_names())


def _rows(module: Module, corpus: Corpus | Examples, split: str, index: int, settings: Settings) -> Rows:
    """This rank's rows ``[r*b, (r+1)*b)`` of the global batch one process of ``--batch N*b``
    takes (all of it in one process)."""
    parallel = module.data_parallel
    if parallel is None:
        return corpus.rows(split, index, settings.batch, settings.seq, settings.seed)
    rows = corpus.rows(split, index, settings.batch * parallel.size, settings.seq, settings.seed)
    return rows.take(slice(parallel.rank * settings.batch, (parallel.rank + 1) * settings.batch))


def _mean_over_ranks(module: Module, values: list[float], what: str) -> list[float]:
    return values if module.data_parallel is None else module.data_parallel.mean(values, what)


def evaluate(module: Module, corpus: Corpus | Examples, settings: Settings) -> float:
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


def _accumulated_loss(
    module: Module, corpus: Corpus | Examples, settings: Settings, step: int
) -> tuple[float, int]:
    """The step's mean loss over its micro-batches, their gradients accumulated and averaged as
    transformers' Trainer averages them (each micro-batch's loss divided by their count), and
    averaged over the ranks on the last one alone (``no_sync`` before it); and the bytes of the
    batches fed. Micro-batch k of step s reads window (s - 1) * grad_accum + k + 1: with one
    micro-batch, window s."""
    n = settings.grad_accum
    losses, fed = [], 0
    for k in range(n):
        feeds = _feeds(module, _rows(module, corpus, "train", (step - 1) * n + k + 1, settings))
        fed += sum(f.nbytes for f in feeds)
        with module.no_sync() if k < n - 1 else contextlib.nullcontext():
            losses.append(float(module(*feeds)))
    if n > 1:
        module.scale_grads(1.0 / n)
    return float(np.mean(losses)), fed


def _every(step: int, period: int, last: int) -> bool:
    """Whether ``step`` is one of every ``period`` steps (0: none but the ``last``)."""
    return step == last or (period > 0 and step % period == 0)


def _steps(
    source, corpus, settings, folder, module, optimizer, scheduler, outcome, signals, done, say, npu
) -> None:
    """Steps ``done + 1 .. settings.steps``, each a row of ``outcome.history``; a checkpoint every
    ``--save-every`` steps, at the end and when a signal came (on every rank: rank 0 writes). On
    the NPU, ``npu`` (a ``FirstSteps``) reports the first two."""
    state, history = module.state, outcome.history
    rank0 = module.data_parallel is None or module.data_parallel.rank == 0
    scaled = module.loss_scaler is not None

    def save(step: int) -> None:
        state.properties["step"] = step
        state.properties.update(
            {
                k: v
                for k, v in settings.recorded(outcome.processes).items()
                if v is not None and not isinstance(v, list)
            }
        )
        state.properties["model"] = source.identity
        with optimizer.consolidated():  # every rank takes part; rank 0 writes
            if not rank0:
                return
            try:  # the rows first: a run killed between the two writes has every row its checkpoint has
                history.save(folder.losses)
                CheckpointState.save_checkpoint(state, folder.checkpoint, include_optimizer_state=True)
            except OSError as e:  # a full disk, a file-size limit: the last checkpoint is written atomically
                raise SettingsError(
                    f"writing the checkpoint of step {step} to {folder.checkpoint} failed ({e.strerror or e}); "
                    f"{_intact(folder)}; free space and go on with --resume"
                ) from None

    progress = Progress(settings.steps) if rank0 else None
    skipped = history.skipped()  # counted as the steps go: the progress line shows it every step
    tokens = settings.batch * settings.seq * settings.grad_accum * outcome.processes
    for step in range(done + 1, settings.steps + 1):
        start = time.perf_counter()
        if npu is not None:
            npu.before_step()
        learning_rate, loss_scale = optimizer.get_learning_rate(), optimizer.get_loss_scale()
        loss, fed = _accumulated_loss(module, corpus, settings, step)
        # One all-reduce: the step's loss over the ranks, and whether any rank was told to stop.
        loss, stop = _mean_over_ranks(module, [loss, float(signals.received or 0)], "the loss's all-reduce")
        if not math.isfinite(loss) and not scaled:  # fp16-mixed skips such a step instead
            raise TrainingError(
                f"the loss is {loss} at step {step} ({settings.precision} has no loss scale to skip such a step); "
                f"{_intact(folder)}: lower --lr or --max-grad-norm and go on with --resume"
            )
        norm = clip_grad_norm_(module, settings.max_grad_norm) if settings.max_grad_norm else None
        updated = optimizer.step()
        scheduler.step()
        module.lazy_reset_grad()
        seconds = time.perf_counter() - start
        if npu is not None:
            for line in npu.after_step(step, module, optimizer, fed):
                say(line)
        eval_loss = (
            evaluate(module, corpus, settings) if _every(step, settings.eval_every, settings.steps) else None
        )
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
        skipped += not updated
        scaling = f"  scale {loss_scale:g}  skipped {skipped}" if scaled else ""
        if progress is not None:
            progress.update(step, loss, tokens / seconds, eval_loss, scaling, learning_rate)
        if _every(step, settings.save_every, settings.steps) or stop:
            save(step)
        if stop:
            outcome.stopped_by = signals.received or signal.SIGTERM  # another rank's signal
            name = signal.Signals(outcome.stopped_by).name
            say(
                f"\nstopped by {name}: saved the checkpoint of step {step} to {folder.checkpoint}; --resume goes on"
            )
            break
