"""A run's folder (``--out``) and its identity. ``run.json``, written when the run starts, records
the model (its kind and a hash of its files) and the settings: ``--resume`` goes on only with the
same model and the same graph-shaping settings (``Settings.resuming``), a fresh run refuses a
folder that holds a run or a model directory unless told to ``--overwrite`` it, ``--out`` is never
the input model's folder, and a lock on ``.lock`` keeps a second run out while one runs."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from pathlib import Path

from ..training.checkpoint import read_properties, write_atomically
from .history import History
from .model_source import ModelSource
from .settings import Settings, SettingsError

RUN = "run.json"
LOCK = ".lock"
CHECKPOINT = "checkpoint.safetensors"
LOSSES_CSV = "losses.csv"
LOSS_CURVE = "loss_curve.png"
ARTIFACTS = "artifacts"
FORMAT = "ort_ascend_ops.run"
# What a run writes into its folder, beside the trained model's files.
_RUN_FILES = (RUN, CHECKPOINT, LOSSES_CSV, LOSS_CURVE, ARTIFACTS)


class RunFolder:
    """``--out``: ``check`` reads it (nothing is written), ``claim`` takes it for this run."""

    def __init__(self, path: Path):
        self.path = path
        self.checkpoint, self.losses, self.curve = path / CHECKPOINT, path / LOSSES_CSV, path / LOSS_CURVE
        self.artifacts = path / ARTIFACTS
        self._lock: int | None = None

    def _record(self) -> dict | None:
        run = self.path / RUN
        if not run.exists():
            return None
        try:
            record = json.loads(run.read_text())
            if record.get("format") != FORMAT:
                raise ValueError(f"no '{FORMAT}' format")
            return {
                "kind": str(record["kind"]),
                "model": str(record["model"]),
                "settings": dict(record["settings"]),
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise SettingsError(
                f"{run}: not the record of a run ({error}); --overwrite replaces it"
            ) from None

    def _holds_run(self) -> bool:
        return any((self.path / name).exists() for name in _RUN_FILES)

    def saved_step(self) -> int:
        """The step of the folder's checkpoint (0 without one)."""
        if not self.checkpoint.exists():
            return 0
        try:
            return int(read_properties(self.checkpoint).get("step", 0))
        except (ValueError, TypeError) as error:
            raise SettingsError(f"{error}; --overwrite replaces the run") from None

    def history(self) -> History:
        """The rows of the steps the checkpoint holds."""
        return History.load(self.losses, self.saved_step())

    def _steps(self) -> str:
        with contextlib.suppress(SettingsError):
            if self.checkpoint.exists():
                return f", {self.saved_step()} steps saved"
        return ", no checkpoint yet"

    def check(self, source: ModelSource, settings: Settings, processes: int = 1) -> Settings:
        """The settings this run of ``processes`` goes on with (a resumed run's, where the
        command left options out), or a ``SettingsError`` naming ``--out`` and the rule the
        folder breaks."""
        out = self.path
        if out.exists() and not out.is_dir():
            raise SettingsError(f"--out {out} is a file, not a folder")
        if out.exists() and (
            out.resolve() == source.path.resolve() or out.resolve() in source.path.resolve().parents
        ):
            raise SettingsError(
                f"--out {out} holds the input model {source.path}: the run would write over it; choose another --out"
            )
        if settings.resume and settings.overwrite:
            raise SettingsError(
                "--resume goes on with the run in --out and --overwrite replaces it: give one"
            )
        record = self._record()
        if settings.overwrite:
            return settings
        if record is not None and (record["kind"], record["model"]) != (source.kind, source.identity):
            raise SettingsError(
                f"--out {out} holds the run of another model ({record['kind']} {record['model']}; this one is "
                f"the {source.kind} {source.identity}): choose another --out, or --overwrite to replace it"
            )
        if settings.resume:
            if record is not None:
                self.history()  # a resumed run's rows, checked before anything is written
                return settings.resuming(record["settings"], str(out), processes)
            if self._holds_run():
                raise SettingsError(
                    f"--out {out} holds a run without its {RUN} (of an earlier version): it cannot be resumed; "
                    "--overwrite replaces it"
                )
            return settings  # nothing to resume yet: a run killed before it began, say
        if self._holds_run():
            raise SettingsError(
                f"--out {out} holds a run ({source.kind} {source.identity}{self._steps()}): --resume goes on with "
                "it, --overwrite replaces it, or choose another --out"
            )
        found = [name for name in source.outputs(settings) if (out / name).exists()]
        if found:
            raise SettingsError(
                f"--out {out} holds a model ({', '.join(found)}) the run's would replace: --overwrite replaces "
                "it, or choose another --out"
            )
        return settings

    def claim(self, source: ModelSource, settings: Settings, processes: int = 1) -> None:
        """Takes the folder for this run: creates it, locks it (another run holding it is a
        ``SettingsError``), checks it again under the lock, removes the run an ``--overwrite``
        replaces and records this one."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise SettingsError(f"--out {self.path} cannot be written ({error.strerror or error})") from None
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock)
            self._lock = None
            raise SettingsError(
                f"--out {self.path} is in use by another run; wait for it, or choose another --out"
            ) from None
        self.check(source, settings, processes)
        if settings.overwrite:
            for name in _RUN_FILES:
                target = self.path / name
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink(missing_ok=True)
        self.record(source, settings, processes)

    def record(self, source: ModelSource, settings: Settings, processes: int) -> None:
        text = json.dumps(
            {
                "format": FORMAT,
                "kind": source.kind,
                "model": source.identity,
                "settings": settings.recorded(processes),
            },
            indent=1,
        )
        try:
            write_atomically(self.path / RUN, lambda f: f.write(text.encode()))
        except OSError as error:
            raise SettingsError(f"--out {self.path} cannot be written ({error.strerror or error})") from None

    def release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
