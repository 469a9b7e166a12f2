"""A run's history, one row per step, as ``losses.csv``: written whole and atomically before each
checkpoint (so that a run killed between the two never leaves steps of its checkpoint without
rows), read back on ``--resume`` with every column checked."""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

from ..training.checkpoint import write_atomically

COLUMNS = ("step", "loss", "eval_loss", "learning_rate", "grad_norm", "loss_scale", "skipped", "seconds")
# How each column reads back: its type, and whether an empty cell (no evaluation, no clipping) is allowed.
_READ = {
    "step": (int, False),
    "loss": (float, False),
    "eval_loss": (float, True),
    "learning_rate": (float, False),
    "grad_norm": (float, True),
    "loss_scale": (float, False),
    "skipped": (int, False),
    "seconds": (float, False),
}


class HistoryError(ValueError):
    """A ``losses.csv`` that is not a run's history; the CLI exits with 2."""


@dataclasses.dataclass
class History:
    """One row per step: the training loss, the held-out loss where evaluated, the learning rate
    the step used, the gradients' norm before clipping (when clipping), the loss scale it ran with
    and whether it was skipped (fp16-mixed) and the seconds it took."""

    rows: list[dict] = dataclasses.field(default_factory=list)

    def losses(self) -> list[float]:
        return [r["loss"] for r in self.rows]

    def evals(self) -> list[tuple[int, float]]:
        return [(r["step"], r["eval_loss"]) for r in self.rows if r["eval_loss"] is not None]

    def skipped(self) -> int:
        return sum(r["skipped"] for r in self.rows)

    def save(self, path: Path) -> None:
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in self.rows)
        data = text.getvalue().encode()
        write_atomically(path, lambda f: f.write(data))

    @classmethod
    def load(cls, path: Path, steps: int) -> History:
        """The rows of the first ``steps`` steps (a run killed after writing its CSV and before its
        checkpoint wrote more); a ``HistoryError`` naming the file, line and column for a file
        that is not a history, or that lacks one of those steps."""
        if not path.exists():
            if steps:
                raise HistoryError(
                    f"{path}: missing, where the checkpoint has {steps} steps; --overwrite starts anew"
                )
            return cls()
        try:
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
                if missing:
                    raise HistoryError(f"{path}: no column {', '.join(missing)}: not the losses.csv of a run")
                rows = [_row(path, line, record) for line, record in enumerate(reader, start=2)]
        except (OSError, UnicodeDecodeError, csv.Error) as error:
            raise HistoryError(f"{path}: cannot be read as CSV ({error})") from None
        kept = [r for r in rows if r["step"] <= steps]
        if [r["step"] for r in kept] != list(range(1, steps + 1)):
            raise HistoryError(f"{path}: does not hold one row for each of the checkpoint's {steps} steps")
        return cls(kept)


def _row(path: Path, line: int, record: dict) -> dict:
    row: dict[str, int | float | None] = {}
    for column, (kind, may_be_empty) in _READ.items():
        text = record.get(column) or ""
        if not text and may_be_empty:
            row[column] = None
            continue
        try:
            row[column] = kind(text)
        except ValueError:
            raise HistoryError(f"{path}:{line}: column {column} holds {text!r}, not a number") from None
    return row
