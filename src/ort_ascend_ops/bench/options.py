"""The ``bench`` command's option values, checked as argparse parses them (its ``type=``): a bad
one stops the command with exit status 2 and a message naming the option and the rule before
anything runs, rather than a traceback, or a failure at the end of a run of minutes."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

# The options without a default, by the kinds of run that read them: any other kind refuses them
# rather than ignoring what the user asked for. "ops": the per-op benchmarks and cliffs;
# "nproc": training_step --nproc, whose thread count follows from the process count;
# "recompute": training_step --recompute, whose children take every core.
READ_BY = {
    "threads": {"ops", "training_step"},
    "dtypes": {"ops"},
    "png": {"ops"},
    "peer_venv": {"training_step"},
    "precision": {"training_step", "npu_step"},
    "nproc": {"nproc"},
    "device": {"nproc"},
    "recompute": {"recompute"},
}
RUNS = {
    "ops": "the per-op benchmarks",
    "training_step": "training_step",
    "nproc": "training_step --nproc",
    "recompute": "training_step --recompute",
    "npu_step": "npu_step",
    "fine_tuning": "fine_tuning",
}
# What the options read by default.
THREADS = list(dict.fromkeys([1, os.cpu_count() or 1]))
DTYPES = ["float32", "bfloat16"]


def unread(args: argparse.Namespace, run: str) -> list[str]:
    """The options given that ``run`` (a key of ``RUNS``) does not read, as the command line
    spells them."""
    return [
        f"--{name.replace('_', '-')}"
        for name, runs in READ_BY.items()
        if getattr(args, name) is not None and run not in runs
    ]


def positive(text: str) -> int:
    """An integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: want an integer of at least 1")
    return value


def counts(text: str) -> list[int]:
    """Comma-separated integers of at least 1 (thread or process counts), each kept once."""
    try:
        return list(dict.fromkeys(positive(t) for t in text.split(",")))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: want comma-separated integers of at least 1, e.g. 1,2"
        ) from None


def dtypes(text: str) -> list[str]:
    """Comma-separated names of ``runner.DTYPES``."""
    from .runner import DTYPES

    names = text.split(",")
    unknown = [name for name in names if name not in DTYPES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {', '.join(DTYPES)}")
    return list(dict.fromkeys(names))


def precisions(text: str) -> list[str]:
    """Comma-separated precisions of training, fp32 (always run, the baseline) first."""
    from ..training.precision import PRECISIONS

    names = text.split(",")
    unknown = [name for name in names if name not in PRECISIONS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {', '.join(PRECISIONS)}")
    return list(dict.fromkeys(["fp32", *names]))


def output_file(text: str) -> str:
    """A file the run can write at its end: its folder exists and is writable."""
    path = Path(text)
    folder = path.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: the folder {folder} does not exist")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    try:  # a file made and dropped at once: permission bits say nothing to root, nor of /proc
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        raise argparse.ArgumentTypeError(f"{text}: the folder {folder} is not writable") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text}: the file is not writable")
    return text


def venv(text: str) -> str:
    """A virtual environment: a folder with bin/python."""
    if not (Path(text) / "bin" / "python").is_file():
        raise argparse.ArgumentTypeError(f"{text}/bin/python does not exist")
    return text
