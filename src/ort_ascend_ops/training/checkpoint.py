"""Checkpoint files: safetensors, the format PyTorch and Hugging Face users already load
(``safetensors.numpy.load_file`` or ``safetensors.torch.load_file`` read the parameters under
their ``state_dict`` names), parsed by a library that validates offsets and shapes, holding no
code (unlike pickle) and mappable without copies. Written atomically: a temporary file in the
same folder, flushed to disk, then renamed over the old one, so a process killed at any point
leaves either the old checkpoint or the new one, never a mix. Written tensor by tensor from the
arrays' own memory: the library's ``save`` builds the whole file in memory first (and a copy of
every tensor on the way), twice the checkpoint at the peak, which a model of many GB cannot
spare."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import ml_dtypes
import numpy as np
import safetensors

FORMAT = "ort_ascend_ops.checkpoint"
VERSION = "1"
SUFFIX = ".safetensors"
# Names of optimizer state tensors: a prefix no state_dict key has.
_OPTIMIZER_PREFIX = "optimizer/"


@dataclass(frozen=True)
class Deferred:
    """A tensor whose bytes are read when the file reaches it: a device's, copied to the host
    one tensor at a time while the file is written, so the host never holds the whole state."""

    shape: tuple[int, ...]
    dtype: np.dtype
    read: Callable[[], np.ndarray]

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


Tensor = np.ndarray | Deferred


def loaded(tensor: Tensor) -> np.ndarray:
    """The tensor's array: read now where it is ``Deferred``."""
    return tensor.read() if isinstance(tensor, Deferred) else tensor


@dataclass
class Contents:
    """What a checkpoint holds, in NumPy: every parameter and whether it trains, the user's
    properties (int, float, str), if saved, the optimizer's step, learning rate and states
    (state name -> parameter name -> array), and under fp16-mixed the loss scaler's state
    (``torch.amp.GradScaler.state_dict()``'s numbers)."""

    parameters: dict[str, Tensor]
    requires_grad: dict[str, bool]
    properties: dict[str, int | float | str] = field(default_factory=dict)
    optimizer: dict | None = None  # {"step": int, "learning_rate": float}
    optimizer_states: dict[str, dict[str, Tensor]] = field(default_factory=dict)
    loss_scale: dict[str, float | int] | None = None


def check_property(name: str, value) -> None:
    """A property is saved as JSON in the metadata: int, float or str, under a str name."""
    if not isinstance(name, str) or type(value) not in (int, float, str):
        raise TypeError(
            f"checkpoint property '{name}': values are int, float or str, not {type(value).__name__}"
        )


def write(path: str | os.PathLike, contents: Contents) -> None:
    """Writes ``contents`` to ``path`` atomically (see the module's docstring)."""
    for name, value in contents.properties.items():
        check_property(name, value)
    tensors = dict(contents.parameters)
    for state, arrays in contents.optimizer_states.items():
        tensors |= {f"{_OPTIMIZER_PREFIX}{state}/{name}": a for name, a in arrays.items()}
    metadata = {
        "format": FORMAT,
        "version": VERSION,
        "requires_grad": json.dumps(contents.requires_grad),
        "properties": json.dumps(contents.properties),
    }
    if contents.optimizer is not None:
        metadata["optimizer"] = json.dumps(contents.optimizer)
    if contents.loss_scale is not None:
        metadata["loss_scale"] = json.dumps(contents.loss_scale)
    write_atomically(Path(path), lambda f: _write_safetensors(f, tensors, metadata))


# safetensors' dtype names (its format's spec); bfloat16 is ml_dtypes'.
_DTYPES = {
    np.dtype(np.float64): "F64",
    np.dtype(np.float32): "F32",
    np.dtype(np.float16): "F16",
    np.dtype(ml_dtypes.bfloat16): "BF16",
    np.dtype(np.int64): "I64",
    np.dtype(np.int32): "I32",
    np.dtype(np.int16): "I16",
    np.dtype(np.int8): "I8",
    np.dtype(np.uint8): "U8",
    np.dtype(np.bool_): "BOOL",
}


_FROM_NAME = {name: dtype for dtype, name in _DTYPES.items()}


def _write_safetensors(f: BinaryIO, tensors: Mapping[str, Tensor], metadata: dict[str, str]) -> None:
    """The safetensors layout (an 8-byte little-endian header size, the JSON header padded to 8
    bytes, the tensors' bytes back to back in the header's order), each tensor written from its
    own memory (a ``Deferred`` one read as its turn comes). The reader, safetensors itself,
    checks every offset against the file."""
    arrays = dict(sorted(tensors.items()))
    header: dict[str, object] = {"__metadata__": metadata}
    offset = 0
    for name, a in arrays.items():
        if a.dtype not in _DTYPES:
            raise TypeError(f"checkpoint tensor '{name}': no safetensors dtype for {a.dtype}")
        header[name] = {
            "dtype": _DTYPES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    f.write(len(text).to_bytes(8, "little"))
    f.write(text)
    for t in arrays.values():
        a = t.read() if isinstance(t, Deferred) else t
        if a.size:
            # Not np.ascontiguousarray, which would make a 0-d array 1-d.
            a = a if a.flags.c_contiguous else a.copy()
            f.write(a.reshape(-1).view(np.uint8).data)


def write_atomically(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Calls ``write`` on a temporary file beside ``path`` that then replaces it (see the module's
    doc): ``path`` holds the old contents or the new ones, whatever happens."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    # The rename itself reaches the disk only with the folder's entry.
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    # Leftovers of savers killed before their rename.
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()


def _metadata(f, path) -> Mapping[str, str]:
    metadata: Mapping[str, str] = f.metadata() or {}
    if metadata.get("format") != FORMAT:
        raise ValueError(f"{path}: not an ort_ascend_ops checkpoint (no '{FORMAT}' metadata)")
    if metadata.get("version") != VERSION:
        raise ValueError(f"{path}: checkpoint version {metadata.get('version')!r}, this reads {VERSION}")
    return metadata


def read_properties(path: str | os.PathLike) -> dict:
    """The checkpoint's properties alone, from its header: no tensor is read."""
    try:
        with safetensors.safe_open(str(path), framework="numpy") as f:
            metadata = _metadata(f, path)
    except safetensors.SafetensorError as error:
        raise ValueError(f"{path}: not a readable safetensors file: {error}") from None
    try:
        return dict(json.loads(metadata["properties"]))
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: malformed checkpoint metadata ({type(error).__name__}: {error})") from None


def read(path: str | os.PathLike) -> Contents:
    """The checkpoint at ``path``, every tensor read; ``ValueError`` naming the file when it is not
    one of ours."""
    with reading(path) as contents:
        contents.parameters = {k: loaded(t) for k, t in contents.parameters.items()}
        contents.optimizer_states = {
            s: {k: loaded(t) for k, t in arrays.items()} for s, arrays in contents.optimizer_states.items()
        }
        return contents


@contextlib.contextmanager
def reading(path: str | os.PathLike) -> Iterator[Contents]:
    """The checkpoint at ``path`` with each tensor ``Deferred``, read from the file (mapped while
    the block runs) when it is taken: a load that moves each tensor where it goes before taking
    the next (ONNX Runtime's memory, a device's) holds one at a time, never the whole state."""
    try:
        file = safetensors.safe_open(str(path), framework="numpy")
    except safetensors.SafetensorError as error:
        raise ValueError(f"{path}: not a readable safetensors file: {error}") from None
    with file:
        metadata = _metadata(file, path)
        tensors = {key: _deferred(file, key, path) for key in file.keys()}  # noqa: SIM118 (no iterator)
        yield _contents(path, metadata, tensors)


def _deferred(file, key: str, path) -> Deferred:
    tensor = file.get_slice(key)
    if tensor.get_dtype() not in _FROM_NAME:
        raise ValueError(
            f"{path}: tensor '{key}' has dtype {tensor.get_dtype()}, which checkpoints do not hold"
        )
    return Deferred(tuple(tensor.get_shape()), _FROM_NAME[tensor.get_dtype()], lambda: file.get_tensor(key))


def _contents(path, metadata: Mapping[str, str], tensors: dict[str, Deferred]) -> Contents:
    try:
        contents = Contents(
            parameters={k: v for k, v in tensors.items() if not k.startswith(_OPTIMIZER_PREFIX)},
            requires_grad={str(k): bool(v) for k, v in json.loads(metadata["requires_grad"]).items()},
            properties=dict(json.loads(metadata["properties"])),
            optimizer=json.loads(metadata["optimizer"]) if "optimizer" in metadata else None,
            loss_scale=json.loads(metadata["loss_scale"]) if "loss_scale" in metadata else None,
        )
        if contents.optimizer is not None:
            contents.optimizer = {
                "step": int(contents.optimizer["step"]),
                "learning_rate": float(contents.optimizer["learning_rate"]),
            }
        if contents.loss_scale is not None and not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in dict(contents.loss_scale).values()
        ):
            raise TypeError(f"the loss scale's values are numbers, not {contents.loss_scale}")
        for name, value in contents.properties.items():
            check_property(name, value)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"{path}: malformed checkpoint metadata ({type(error).__name__}: {error})") from None
    for key, tensor in tensors.items():
        if key.startswith(_OPTIMIZER_PREFIX):
            state, _, name = key.removeprefix(_OPTIMIZER_PREFIX).partition("/")
            if name not in contents.parameters:
                raise ValueError(f"{path}: optimizer state '{key}' belongs to no parameter")
            contents.optimizer_states.setdefault(state, {})[name] = tensor
    if set(contents.requires_grad) != set(contents.parameters):
        raise ValueError(f"{path}: the parameters and their requires_grad flags do not match")
    return contents
