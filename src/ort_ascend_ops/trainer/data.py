"""The text a language model trains on, as token ids: the documents of text files, ``.jsonl``
files (each line's ``text``) or a dataset saved with ``datasets``' ``save_to_disk``, tokenized by a
Hugging Face tokenizer and joined with its end-of-sequence token, or taken as bytes (vocabulary
256: no tokenizer needed, any text on disk will do)."""

from __future__ import annotations

import dataclasses
import glob
import importlib
import json
import os
import sys
import sysconfig
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

SPLITS = ("train", "held_out")
SEPARATOR = b"\n\n"  # between byte-level documents
# Fewer tokens than this in either split is a mistake (a wrong path), not a corpus.
MINIMUM_TOKENS = 1024
# Not the library a user imports: tests are repetitive, and these hold odd or generated code.
_STDLIB_SKIPPED = {"site-packages", "dist-packages", "test", "tests", "idlelib", "lib2to3", "turtledemo"}


class DataError(ValueError):
    """Data ``train`` cannot take (a missing path, too little text, a malformed line), naming the
    file; the CLI exits with 2."""


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
    """Two arrays of token ids: ``train`` to learn from and ``held_out`` to measure generalisation
    on. Whole documents go to one side, so held-out text is never a neighbour of training text."""

    train: np.ndarray
    held_out: np.ndarray
    description: str
    documents: int = 0

    @classmethod
    def from_paths(
        cls,
        paths: Iterable[str | os.PathLike],
        held_out_every: int = 20,
        *,
        tokenizer=None,
        description: str = "",
    ) -> Corpus:
        """The documents of ``paths`` (files, directories searched recursively, glob patterns; a
        directory ``datasets`` saved is read as that dataset's ``text`` column), in path order so
        the split is the same on every machine; document ``i`` is held out when ``i %
        held_out_every == held_out_every - 1``. ``tokenizer``: a Hugging Face tokenizer, whose
        end-of-sequence token follows each document; None: bytes. Files with a NUL byte are
        taken as binary and skipped."""
        roots = [str(p) for p in paths]
        documents = (doc for root in roots for doc in _documents(root))
        said = ", ".join(roots) if len(roots) <= 3 else f"{roots[0]} and {len(roots) - 1} more paths"
        return cls._split(documents, held_out_every, description or said, roots, tokenizer)

    @classmethod
    def python_stdlib(cls, held_out_every: int = 20, *, tokenizer=None) -> Corpus:
        """The ``*.py`` files of this interpreter's standard library: real, varied code that
        every Python installation has."""
        root = Path(sysconfig.get_paths()["stdlib"])
        files = []
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [d for d in subfolders if d not in _STDLIB_SKIPPED]
            files += [Path(folder, n) for n in names if n.endswith(".py")]
        files = sorted(f for f in files if f.is_file())
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        documents = (doc for f in files for doc in _file_documents(f))
        return cls._split(
            documents, held_out_every, f"Python {version} standard library", [str(root)], tokenizer
        )

    @classmethod
    def _split(
        cls, documents: Iterator[bytes], every: int, description: str, roots: list[str], tokenizer
    ) -> Corpus:
        if every < 2:
            raise ValueError(f"held_out_every must be at least 2, not {every}")
        encode = _encoder(tokenizer)
        parts: dict[str, list[np.ndarray]] = {split: [] for split in SPLITS}
        count = 0
        for data in documents:
            parts[SPLITS[count % every == every - 1]].append(encode(data))
            count += 1
        dtype = np.uint8 if tokenizer is None else np.int32
        arrays = {k: np.concatenate(v).astype(dtype) if v else np.zeros(0, dtype) for k, v in parts.items()}
        for split, array in arrays.items():
            if array.size < MINIMUM_TOKENS:
                raise DataError(
                    f"{', '.join(roots)}: too little text ({count} documents, {array.size} tokens in {split}; "
                    f"at least {MINIMUM_TOKENS} needed in each split)"
                )
        return cls(arrays["train"], arrays["held_out"], description, count)

    def batch(self, split: str, index: int, batch: int, seq: int, seed: int = 0) -> np.ndarray:
        """``batch`` windows of ``seq`` tokens as int64 ids ``[batch, seq]``, at random offsets
        that depend only on the arguments, so a run can be repeated or resumed at any step with
        the windows an uninterrupted run takes. A causal LM's labels are the same window (the
        model shifts them)."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
        data = getattr(self, split)
        if data.size < seq + 1:
            raise ValueError(f"the {split} split has {data.size} tokens, fewer than --seq + 1 = {seq + 1}")
        rng = np.random.default_rng([seed, index, SPLITS.index(split)])
        offsets = rng.integers(0, data.size - seq, size=batch, endpoint=True)
        return data[offsets[:, None] + np.arange(seq)].astype(np.int64)

    def check_window(self, seq: int) -> None:
        """A ``DataError`` unless each split holds one window of ``seq`` tokens and its next."""
        for split in SPLITS:
            size = getattr(self, split).size
            if size < seq + 1:
                raise DataError(
                    f"{self.description}: the {split} split has {size} tokens, fewer than one window "
                    f"(--seq {seq} + 1)"
                )

    def vocabulary_needed(self) -> int:
        """One more than the largest token id."""
        return int(max(self.train.max(initial=0), self.held_out.max(initial=0))) + 1

    def describe(self) -> str:
        return (
            f"{self.description}: {self.documents:,} documents, {self.train.size:,} tokens train, "
            f"{self.held_out.size:,} held out"
        )


def _encoder(tokenizer) -> Callable[[bytes], np.ndarray]:
    if tokenizer is None:
        return lambda data: np.frombuffer(data + SEPARATOR, dtype=np.uint8)
    eos = tokenizer.eos_token_id
    if eos is None:
        raise DataError("the tokenizer has no end-of-sequence token to join documents with")

    def encode(data: bytes) -> np.ndarray:
        text = data.decode("utf-8", errors="replace")
        return np.array([*tokenizer(text, add_special_tokens=False)["input_ids"], eos], np.int64)

    return encode


def _documents(root: str) -> Iterator[bytes]:
    path = Path(root)
    if path.is_dir() and (path / "dataset_info.json").exists():
        yield from _dataset_documents(path)
    elif path.is_file():
        yield from _file_documents(path)
    elif path.is_dir():
        for f in sorted(f for f in path.rglob("*") if f.is_file()):
            yield from _file_documents(f)
    else:
        matches = sorted(glob.glob(root, recursive=True)) if glob.has_magic(root) else []
        if not matches:
            raise DataError(f"{root}: no such file or directory")
        for match in matches:
            yield from _documents(match)


def _file_documents(path: Path) -> Iterator[bytes]:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise DataError(f"{path}: cannot be read ({error.strerror or error})") from None
    if b"\0" in data:
        return
    if path.suffix != ".jsonl":
        yield data
        return
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{number}: not a JSON line ({e.msg})") from None
        text = record.get("text") if isinstance(record, dict) else None
        if not isinstance(text, str):
            raise DataError(f"{path}:{number}: a .jsonl line needs a string field 'text'")
        yield text.encode()


def _dataset_documents(path: Path) -> Iterator[bytes]:
    try:
        datasets = importlib.import_module("datasets")  # an optional extra: no stubs needed
    except ImportError:
        raise DataError(
            f"{path}: a saved dataset needs the `datasets` package (pip install datasets)"
        ) from None
    dataset = datasets.load_from_disk(str(path))
    if isinstance(dataset, datasets.DatasetDict):
        dataset = dataset["train"] if "train" in dataset else next(iter(dataset.values()))
    if "text" not in dataset.column_names:
        raise DataError(f"{path}: the dataset has no 'text' column (it has {dataset.column_names})")
    for text in dataset["text"]:
        yield str(text).encode()
