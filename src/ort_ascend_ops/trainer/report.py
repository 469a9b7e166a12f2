"""What a run shows: the progress line, the summary at the end and the loss curve."""

from __future__ import annotations

import contextlib
import math
import resource
import sys
from collections.abc import Callable
from pathlib import Path

from .history import History


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Progress:
    """One line redrawn in place on a terminal, else a line every tenth of the run."""

    def __init__(self, total: int, stream=None):
        # sys.stdout as it is now, not as it was at import (a notebook or pytest replaces it).
        self.total, self.stream = total, sys.stdout if stream is None else stream
        self.tty = self.stream.isatty()

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


def summary(
    history: History, tokens_per_step: int, ranks: int, out: Path, steps: int, written: list[str]
) -> str:
    """The run on one screen: steps, tokens (of all ``ranks``), time, losses, the best held-out
    loss and the files ``written`` into ``out``."""
    if not history.rows:
        return f"nothing to train: the run in {out} has done its {steps} steps"
    first, last = history.rows[0], history.rows[-1]
    count = len(history.rows)
    tokens = count * tokens_per_step
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
    if history.skipped():
        lines.append(f"skipped steps (fp16 overflow): {history.skipped()}")
    lines.append(f"wrote {out}: {', '.join(written)}")
    return "\n".join(lines)


def plot(history: History, path: Path, say: Callable[[str], None], vocabulary: int) -> bool:
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
