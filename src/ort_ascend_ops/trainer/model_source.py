"""What ``train`` trains: a ``ModelSource``, an ONNX export (``OnnxExport``, here) or a Hugging Face
directory (``hf_directory.HfDirectory``), behind one protocol. ``open_model`` tells them apart
once and checks the path's files without building anything; every way a path can be wrong is a
``ModelError`` naming it and what it is not, which the command line turns into exit code 2."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np
import onnx
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from onnx import TensorProto

from ..export.packed_attention import BOUNDARIES, POSITIONS
from .settings import Settings

BYTES = 256  # the vocabulary of a model without a tokenizer: token ids are bytes


class ModelError(ValueError):
    """A model path ``train`` cannot take; the CLI exits with 2."""


class ModelSource(Protocol):
    """A model ``train`` can train: ``kind`` says which, ``identity`` is what a run folder records
    and a ``--resume`` must match (a hash of the model's files), ``tokenizer`` (None: bytes)."""

    path: Path
    kind: str
    identity: str

    @property
    def tokenizer(self) -> object | None: ...

    @property
    def vocab_size(self) -> int: ...

    def load(self, say: Callable[[str], None]) -> None:
        """What is costly: after every check of paths and settings passed."""

    def check(self, settings: Settings) -> None:
        """A ``ModelError`` where ``settings`` cannot train this model (a fixed shape, a sequence
        past its positions)."""

    def export(self, settings: Settings) -> onnx.ModelProto:
        """The model with its loss, for ``generate_artifacts``."""

    def input_names(self) -> list[str]:
        """The names of the exported model's token inputs (``labels`` takes the labels)."""

    def describe(self) -> str:
        """What the training line adds about the model (how it is stored)."""

    def outputs(self, settings: Settings) -> list[str]:
        """The files the trained model is written as in ``--out`` (none for an export)."""

    def write(self, parameters: dict[str, np.ndarray], out: Path) -> list[str]:
        """The trained model written into ``out``; the files written."""


def open_model(path: str | Path) -> ModelSource:
    """The model at ``path``: a directory is a Hugging Face directory, a file an ONNX export."""
    from .hf_directory import HfDirectory

    path = Path(path)
    if path.is_dir():
        return HfDirectory.open(path)
    if path.is_file():
        return OnnxExport.open(path)
    if path.exists():
        raise ModelError(
            f"{path}: not a regular file nor a directory (an ONNX model or a Hugging Face directory)"
        )
    raise ModelError(f"{path}: no such ONNX model or Hugging Face directory")


def _dims(value: onnx.ValueInfoProto) -> list[int | str | None] | None:
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim]


def at_run_shape(model: onnx.ModelProto, settings: Settings) -> onnx.ModelProto:
    """``model`` with its token inputs declared ``[--batch, --seq]`` (shape inference then
    knows the loss's rows); its nodes and initializers as they are."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for value in fixed.graph.input:
        if value.name != BOUNDARIES and value.type.tensor_type.elem_type in (
            TensorProto.INT64,
            TensorProto.INT32,
        ):
            for dim, size in zip(
                value.type.tensor_type.shape.dim, (settings.batch, settings.seq), strict=False
            ):
                dim.Clear()
                dim.dim_value = size
    del fixed.graph.value_info[:]  # inferred again, from the fixed inputs
    return fixed


def fixed_elsewhere(value: onnx.ValueInfoProto, settings: Settings) -> bool:
    """Whether the token input ``value`` has a fixed dim that ``[--batch, --seq]`` is not."""
    dims = _dims(value) or [None, None]
    if len(dims) != 2:
        return False
    return any(
        isinstance(d, int) and d != n for d, n in zip(dims, (settings.batch, settings.seq), strict=True)
    )


class OnnxExport:
    """An ONNX model whose integer inputs all take the token window (a Hugging Face causal LM's
    ``input_ids`` and ``labels``) and whose output ``loss`` (or first output) is the scalar loss;
    its tokens are bytes."""

    kind = "ONNX export"
    tokenizer = None
    vocab_size = BYTES

    def __init__(self, path: Path, model: onnx.ModelProto, identity: str):
        self.path, self._model, self.identity = path, model, identity
        self._check_external_data()
        self._check_interface()

    @classmethod
    def open(cls, path: Path) -> OnnxExport:
        try:
            data = path.read_bytes()
        except OSError as error:
            raise ModelError(f"{path}: cannot be read ({error.strerror or error})") from None
        if not data:
            raise ModelError(f"{path}: an empty file, not an ONNX model")
        try:
            model = onnx.load_model_from_string(data)
        except (DecodeError, RuntimeWarning, ValueError) as error:
            raise ModelError(
                f"{path}: not an ONNX model (truncated, or another kind of file: {error})"
            ) from None
        if not model.opset_import or not model.graph.output:
            raise ModelError(f"{path}: not an ONNX model (it parses, but holds no graph with outputs)")
        return cls(path, model, f"{path.name} sha256 {hashlib.sha256(data).hexdigest()[:16]}")

    def _check_external_data(self) -> None:
        folder = self.path.parent.resolve()
        for tensor in self._model.graph.initializer:
            if tensor.data_location != TensorProto.EXTERNAL:
                continue
            entries = {e.key: e.value for e in tensor.external_data}
            location = folder / entries.get("location", "")
            end = int(entries.get("offset", 0) or 0) + int(entries.get("length", 0) or 0)
            if not location.resolve().is_relative_to(folder):
                raise ModelError(
                    f"{self.path}: weight '{tensor.name}' names external data outside its folder"
                )
            if not location.is_file():
                raise ModelError(f"{self.path}: weight '{tensor.name}' is in {location}, which is missing")
            if location.stat().st_size < end:
                raise ModelError(
                    f"{self.path}: weight '{tensor.name}' ends past the end of {location} (truncated)"
                )

    def _inputs(self) -> list[onnx.ValueInfoProto]:
        initializers = {i.name for i in self._model.graph.initializer}
        return [i for i in self._model.graph.input if i.name not in initializers]

    def _check_interface(self) -> None:
        outputs = {o.name: o for o in self._model.graph.output}
        loss = outputs.get("loss", self._model.graph.output[0])
        dims = _dims(loss)
        elem = loss.type.tensor_type.elem_type
        floats = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE)
        if elem not in floats or (dims is not None and dims):
            raise ModelError(
                f"{self.path}: its loss output '{loss.name}' is {onnx.helper.tensor_dtype_to_string(elem)}{dims}, "
                "not a scalar: train needs an export whose output 'loss' (or first output) is the loss "
                "(export_torch a Hugging Face causal LM with its labels)"
            )
        integers = (TensorProto.INT64, TensorProto.INT32)
        for value in self._inputs():
            dims = _dims(value)
            rank = 1 if value.name == BOUNDARIES else 2
            if value.type.tensor_type.elem_type not in integers or (dims is not None and len(dims) != rank):
                raise ModelError(
                    f"{self.path}: input '{value.name}' is not a [batch, sequence] tensor of token ids: train "
                    "feeds the token window to every input (a causal LM's input_ids and labels; with --pack, "
                    f"position_ids, and {BOUNDARIES} the documents' boundaries)"
                )

    def check(self, settings: Settings) -> None:
        if settings.lora:
            raise ModelError(
                f"{self.path}: LoRA (--lora-r, --adapter) wraps a Hugging Face directory's model with PEFT; "
                "this is an ONNX export (export_torch a peft model, and generate_artifacts trains its adapters)"
            )
        missing = [n for n in (POSITIONS, BOUNDARIES) if n not in self.input_names()]
        if settings.pack and missing:
            raise ModelError(
                f"--pack: {self.path} has no input {' nor '.join(map(repr, missing))}: per-document attention "
                "needs an export that takes them (train a Hugging Face directory with --pack, which exports one)"
            )
        for value in self._inputs():
            if fixed_elsewhere(value, settings):
                raise ModelError(
                    f"{self.path}: input '{value.name}' is fixed at {_dims(value)}, which --batch {settings.batch} "
                    f"--seq {settings.seq} cannot feed (export with dynamic shapes, or train at that shape)"
                )
        inputs = {v.name for v in self._inputs()}
        tables = {i.name: i.dims for i in self._model.graph.initializer}
        for node in self._model.graph.node:
            if node.op_type == "Gather" and node.input[0] in tables and node.input[1] in inputs:
                rows = tables[node.input[0]][0]
                if rows < BYTES:
                    raise ModelError(
                        f"{self.path}: the embedding '{node.input[0]}' has {rows} rows; train feeds it bytes "
                        f"(token ids 0 to {BYTES - 1})"
                    )

    def load(self, say: Callable[[str], None]) -> None:
        pass

    def input_names(self) -> list[str]:
        return [v.name for v in self._inputs()]

    def export(self, settings: Settings) -> onnx.ModelProto:
        return onnx.load(self.path)

    def describe(self) -> str:
        return ""

    def outputs(self, settings: Settings) -> list[str]:
        return []

    def write(self, parameters: dict[str, np.ndarray], out: Path) -> list[str]:
        return []
