"""A byte-level text corpus for training a small language model: the token is the byte
(vocabulary 256), so no tokenizer or download is needed and any text on disk will do."""

from __future__ import annotations

import dataclasses
import os
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path

import numpy as np

SPLITS = ("train", "held_out")
SEPARATOR = b"\n\n"
# Fewer bytes than this in either split is a mistake (a wrong path), not a corpus.
MINIMUM_BYTES = 1024
# Not the library a user imports: tests are repetitive, and these hold odd or generated code.
_STDLIB_SKIPPED = {"site-packages", "dist-packages", "test", "tests", "idlelib", "lib2to3", "turtledemo"}


@dataclasses.dataclass(frozen=True, eq=False)
class ByteCorpus:
    """Two byte arrays: ``train`` to learn from and ``held_out`` to measure generalisation on.
    Whole files go to one side, so held-out text is never a neighbour of training text."""

    train: np.ndarray
    held_out: np.ndarray
    description: str
    files: int = 0

    @classmethod
    def from_paths(
        cls, paths: Iterable[str | os.PathLike], held_out_every: int = 20, *, description: str = ""
    ) -> ByteCorpus:
        """Every text file in ``paths`` (files, or directories searched recursively), in path
        order so the split is the same on every machine; file ``i`` is held out when ``i %
        held_out_every == held_out_every - 1``. Files with a NUL byte are taken as binary and
        skipped."""
        roots = [Path(p) for p in paths]
        files = sorted({f for p in roots for f in _files(p)})
        return cls._split(files, held_out_every, description or ", ".join(map(str, roots)), roots)

    @classmethod
    def python_stdlib(cls, held_out_every: int = 20) -> ByteCorpus:
        """The ``*.py`` files of this interpreter's standard library: real, varied code that
        every Python installation has."""
        root = Path(sysconfig.get_paths()["stdlib"])
        files = []
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [d for d in subfolders if d not in _STDLIB_SKIPPED]
            files += [Path(folder, n) for n in names if n.endswith(".py")]
        files = sorted(f for f in files if f.is_file())
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        return cls._split(files, held_out_every, f"Python {version} standard library", [root])

    @classmethod
    def _split(cls, files: list[Path], every: int, description: str, paths: list[Path]) -> ByteCorpus:
        if every < 2:
            raise ValueError(f"held_out_every must be at least 2, not {every}")
        parts: dict[str, list[bytes]] = {split: [] for split in SPLITS}
        count = 0
        for path in files:
            data = path.read_bytes()
            if b"\0" in data:
                continue
            parts[SPLITS[count % every == every - 1]].append(data + SEPARATOR)
            count += 1
        arrays = {k: np.frombuffer(b"".join(v), dtype=np.uint8) for k, v in parts.items()}
        for split, array in arrays.items():
            if array.size < MINIMUM_BYTES:
                where = ", ".join(map(str, paths))
                raise ValueError(
                    f"{where}: too little text ({count} files, {array.size} bytes in {split}; "
                    f"at least {MINIMUM_BYTES} needed in each split)"
                )
        return cls(arrays["train"], arrays["held_out"], description, count)

    def batch(self, split: str, index: int, batch: int, seq: int, seed: int = 0) -> np.ndarray:
        """``batch`` windows of ``seq`` bytes as int64 token ids ``[batch, seq]``, at random
        offsets that depend only on the arguments, so a run can be repeated or resumed at any
        step. A causal LM's labels are the same window (the model shifts them)."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
        data = getattr(self, split)
        if data.size < seq + 1:
            raise ValueError(f"the {split} split has {data.size} bytes, fewer than seq + 1 = {seq + 1}")
        rng = np.random.default_rng([seed, index, SPLITS.index(split)])
        offsets = rng.integers(0, data.size - seq, size=batch, endpoint=True)
        return data[offsets[:, None] + np.arange(seq)].astype(np.int64)

    def describe(self) -> str:
        return (
            f"{self.description}: {self.files:,} files, {self.train.size / 1e6:.1f} MB train, "
            f"{self.held_out.size / 1e6:.1f} MB held out"
        )


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        return [f for f in path.rglob("*") if f.is_file()]
    raise ValueError(f"{path}: no such file or directory")
