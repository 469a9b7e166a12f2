"""The text a language model trains on, as token ids: the documents of text files, ``.jsonl``
files (each line's ``text``) or a dataset saved with ``datasets``' ``save_to_disk``, tokenized by a
Hugging Face tokenizer and joined with its end-of-sequence token, or taken as bytes (vocabulary
256: no tokenizer needed, any text on disk will do)."""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import importlib
import json
import os
import sys
import sysconfig
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from ..export.packed_attention import BOUNDARIES, POSITIONS, boundaries

SPLITS = ("train", "held_out")
SEPARATOR = b"\n\n"  # between byte-level documents
# Fewer tokens than this in either split is a mistake (a wrong path), not a corpus.
MINIMUM_TOKENS = 1024
# Not the library a user imports: tests are repetitive, and these hold odd or generated code.
_STDLIB_SKIPPED = {"site-packages", "dist-packages", "test", "tests", "idlelib", "lib2to3", "turtledemo"}


class DataError(ValueError):
    """Data ``train`` cannot take (a missing path, too little text, a malformed line), naming the
    file; the CLI exits with 2."""


IGNORED = -100  # torch's cross_entropy ignore_index, which Hugging Face's causal-LM loss uses
LABELS = "labels"


@dataclasses.dataclass(frozen=True, eq=False)
class Rows:
    """A batch's rows, ``[batch, seq]`` int64: token ids, labels (-100 off the loss; a causal LM
    shifts them) and, for packed rows, each token's position in its document (restarting at 0
    where a document starts; None: one document a row)."""

    ids: np.ndarray
    labels: np.ndarray
    positions: np.ndarray | None = None

    def take(self, rows: slice | np.ndarray) -> Rows:
        positions = None if self.positions is None else self.positions[rows]
        return Rows(self.ids[rows], self.labels[rows], positions)

    def boundaries(self) -> np.ndarray:
        """The documents' cumulative boundaries over the flattened tokens, int32: 0, then each
        document's end (transformers' ``cu_seq_lens_q``)."""
        assert self.positions is not None
        return boundaries(self.positions)

    def feeds(self, names: Iterable[str]) -> list[np.ndarray]:
        """The inputs named ``names``: the labels, positions and boundaries to theirs, the ids
        to every other."""
        by_name = {LABELS: self.labels}
        if self.positions is not None:
            by_name |= {POSITIONS: self.positions, BOUNDARIES: self.boundaries()}
        return [by_name.get(name, self.ids) for name in names]


@dataclasses.dataclass(frozen=True, eq=False)
class Corpus:
    """Two arrays of token ids: ``train`` to learn from and ``held_out`` to measure generalisation
    on. Whole documents go to one side, so held-out text is never a neighbour of training text."""

    train: np.ndarray
    held_out: np.ndarray
    description: str
    documents: int = 0
    starts: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # each document's first token
    packed: bool = False  # rows attend per document (``per_document``)

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
        starts = {k: np.cumsum([0] + [len(d) for d in v[:-1]], dtype=np.int64) for k, v in parts.items()}
        for split, array in arrays.items():
            if array.size < MINIMUM_TOKENS:
                raise DataError(
                    f"{', '.join(roots)}: too little text ({count} documents, {array.size} tokens in {split}; "
                    f"at least {MINIMUM_TOKENS} needed in each split)"
                )
        return cls(arrays["train"], arrays["held_out"], description, count, starts)

    def batch(self, split: str, index: int, batch: int, seq: int, seed: int = 0) -> np.ndarray:
        """``batch`` windows of ``seq`` tokens as int64 ids ``[batch, seq]``, at random offsets
        that depend only on the arguments, so a run can be repeated or resumed at any step with
        the windows an uninterrupted run takes. A causal LM's labels are the same window (the
        model shifts them)."""
        return getattr(self, split)[self._tokens(split, index, batch, seq, seed)].astype(np.int64)

    def _tokens(self, split: str, index: int, batch: int, seq: int, seed: int) -> np.ndarray:
        """The indices of ``batch``'s windows' tokens in ``split``, ``[batch, seq]``."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
        size = getattr(self, split).size
        if size < seq + 1:
            raise ValueError(f"the {split} split has {size} tokens, fewer than --seq + 1 = {seq + 1}")
        rng = np.random.default_rng([seed, index, SPLITS.index(split)])
        offsets = rng.integers(0, size - seq, size=batch, endpoint=True)
        return offsets[:, None] + np.arange(seq)

    def rows(self, split: str, index: int, batch: int, seq: int, seed: int = 0) -> Rows:
        """``batch``'s windows as ``Rows``: the labels are the window (the model shifts it). A
        packed corpus restarts the positions at each document's first token in a window, which
        is then no token's label (the one before it is another document's)."""
        tokens = self._tokens(split, index, batch, seq, seed)
        window = getattr(self, split)[tokens].astype(np.int64)
        if not self.packed:
            return Rows(window, window)
        starts = self.starts[split]
        first = np.maximum(starts[np.searchsorted(starts, tokens, side="right") - 1], tokens[:, :1])
        positions = tokens - first
        return Rows(window, np.where(positions == 0, IGNORED, window), positions)

    def per_document(self) -> Corpus:
        """This corpus with its rows packed: each document attending to itself alone."""
        return dataclasses.replace(self, packed=True)

    def fingerprint(self) -> str:
        return hashlib.sha256(self.train.tobytes() + self.held_out.tobytes()).hexdigest()[:16]

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


def expand(roots: Iterable[str | os.PathLike]) -> list[Path]:
    """The files (and ``datasets`` folders) of ``roots``, each a file, a folder searched
    recursively, a ``datasets`` save_to_disk folder or a glob pattern, in the roots' order and
    each folder's sorted."""
    found: list[Path] = []
    for root in map(str, roots):
        path = Path(root)
        if path.is_file() or (path.is_dir() and (path / "dataset_info.json").exists()):
            found.append(path)
        elif path.is_dir():
            found += sorted(f for f in path.rglob("*") if f.is_file())
        else:
            matches = sorted(glob.glob(root, recursive=True)) if glob.has_magic(root) else []
            if not matches:
                raise DataError(f"{root}: no such file or directory")
            found += expand(matches)
    return found


def _documents(root: str) -> Iterator[bytes]:
    for path in expand([root]):
        yield from _dataset_documents(path) if path.is_dir() else _file_documents(path)


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
