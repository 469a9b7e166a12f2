"""HCCL, the vendor's collective library, between the NPUs of a data-parallel group: one
communicator and one stream per process, the collectives queued on that stream over device
values, so that gradients and parameters go device to device and never through the host.

The library is opened at run time, as the aclnn backend opens CANN's (``$ASCEND_HOME_PATH/lib64``
first, then the loader's path), through its C API (the vendor's ``hccl.h``). The communicator is
bootstrapped through torch.distributed's store, as torch_npu's ProcessGroupHCCL does: rank 0's
``HcclGetRootInfo`` is set there and every rank reads it, so launching, rendezvous across machines
and elastic restarts stay torchrun's. Device addresses are only handed to HCCL: the host never
reads one. A collective's failure (a rank gone, a timeout: ``HCCL_CONNECT_TIMEOUT`` and
``HCCL_EXEC_TIMEOUT``, set from the group's timeout) surfaces at ``wait`` as an ``HcclError``
carrying the runtime's message."""

from __future__ import annotations

import ctypes
import math
import os
from collections.abc import Sequence

import ml_dtypes
import numpy as np
import onnxruntime as ort

from ...runtime import get_library_path
from .checkpoint_state import dtype_of

_ROOT_INFO_BYTES = 4108  # HCCL_ROOT_INFO_BYTES (hccl_types.h)
# HcclDataType and HcclReduceOp (hccl_types.h).
_TYPES = {
    np.dtype(np.int8): 0,
    np.dtype(np.int16): 1,
    np.dtype(np.int32): 2,
    np.dtype(np.float16): 3,
    np.dtype(np.float32): 4,
    np.dtype(np.int64): 5,
    np.dtype(np.uint8): 7,
    np.dtype(np.float64): 10,
    np.dtype(ml_dtypes.bfloat16): 11,
}
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3}


class HcclError(RuntimeError):
    """An HCCL or runtime call that failed, with the runtime's own message."""


def _library(name: str) -> ctypes.CDLL:
    home = os.environ.get("ASCEND_HOME_PATH")
    tried = []
    for path in ([os.path.join(home, "lib64", name)] if home else []) + [name]:
        try:
            return ctypes.CDLL(path)
        except OSError as error:
            tried.append(str(error))
    raise HcclError(
        f"HCCL: {name} is not installed or not on the library path (source CANN's set_env.sh); tried: "
        + "; ".join(tried)
    )


class Communicator:
    """The HCCL communicator of ``size`` ranks, this one ``rank`` on NPU ``device_id``, made from
    the root info rank 0 puts in ``store`` (a torch.distributed store) under ``key``."""

    def __init__(self, store, key: str, rank: int, size: int, device_id: int, timeout_seconds: float):
        self.name = key  # as the graph's HcclAllReduce nodes name it (gradient_buckets)
        seconds = str(max(1, math.ceil(timeout_seconds)))
        os.environ["HCCL_CONNECT_TIMEOUT"] = os.environ["HCCL_EXEC_TIMEOUT"] = seconds
        self.rank, self.size = rank, size
        self._acl = _library("libascendcl.so")
        self._acl.aclGetRecentErrMsg.restype = ctypes.c_char_p
        self._hccl = _library("libhccl.so")
        self._comm = ctypes.c_void_p()
        self._stream = ctypes.c_void_p()
        self._check(self._acl.aclrtSetDevice(device_id), "aclrtSetDevice")
        root = ctypes.create_string_buffer(_ROOT_INFO_BYTES)
        if rank == 0:
            self._check(self._hccl.HcclGetRootInfo(root), "HcclGetRootInfo")
            store.set(key, root.raw)
        else:
            ctypes.memmove(root, store.get(key), _ROOT_INFO_BYTES)
        self._check(
            self._hccl.HcclCommInitRootInfo(
                ctypes.c_uint32(size), root, ctypes.c_uint32(rank), ctypes.byref(self._comm)
            ),
            f"HcclCommInitRootInfo (rank {rank} of {size}, device {device_id})",
        )
        self._check(self._acl.aclrtCreateStream(ctypes.byref(self._stream)), "aclrtCreateStream")
        self._native = ctypes.CDLL(get_library_path())  # the library ONNX Runtime's sessions load
        error = ctypes.create_string_buffer(512)
        if self._native.OrtAscendOps_RegisterHcclGroup(
            key.encode(), self._comm, self._stream, error, ctypes.c_size_t(len(error))
        ):
            raise HcclError(f"registering the communicator with the native library: {error.value.decode()}")

    def _check(self, code: int, call: str) -> None:
        if code != 0:
            message = (self._acl.aclGetRecentErrMsg() or b"").decode(errors="replace")
            raise HcclError(f"{call} failed with {code}: {message or 'no message'}")

    @staticmethod
    def _buffer(value: ort.OrtValue) -> tuple[ctypes.c_void_p, ctypes.c_uint64, int]:
        dtype = dtype_of(value)
        if dtype not in _TYPES:
            raise HcclError(f"HCCL: no collective takes {dtype} values")
        count = int(np.prod(value.shape(), dtype=np.int64))
        return ctypes.c_void_p(value.data_ptr()), ctypes.c_uint64(count), _TYPES[dtype]

    def all_reduce(self, values: Sequence[ort.OrtValue], op: str = "sum") -> None:
        """Each device value replaced, in place, by its reduction over the ranks (queued)."""
        for value in values:
            pointer, count, dtype = self._buffer(value)
            if count.value:
                self._check(
                    self._hccl.HcclAllReduce(
                        pointer, pointer, count, dtype, OPS[op], self._comm, self._stream
                    ),
                    "HcclAllReduce",
                )

    def _blocks(self, value: ort.OrtValue) -> tuple[ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, int]:
        """A 1-D device value cut into ``size`` equal blocks: its start, this rank's block, the
        block's element count and the HCCL type."""
        pointer, count, dtype = self._buffer(value)
        block = count.value // self.size
        mine = ctypes.c_void_p(value.data_ptr() + self.rank * block * dtype_of(value).itemsize)
        return pointer, mine, ctypes.c_uint64(block), dtype

    def reduce_scatter(self, values: Sequence[ort.OrtValue]) -> None:
        """Each 1-D device value, cut into ``size`` equal blocks, gets in this rank's block the sum
        over the ranks of that block (queued; the other blocks keep this rank's values)."""
        for value in values:
            whole, mine, block, dtype = self._blocks(value)
            if block.value:
                self._check(
                    self._hccl.HcclReduceScatter(
                        whole, mine, block, dtype, OPS["sum"], self._comm, self._stream
                    ),
                    "HcclReduceScatter",
                )

    def all_gather(self, values: Sequence[ort.OrtValue]) -> None:
        """Each 1-D device value, cut into ``size`` equal blocks, gets every rank's own block
        (queued)."""
        for value in values:
            whole, mine, block, dtype = self._blocks(value)
            if block.value:
                self._check(
                    self._hccl.HcclAllGather(mine, whole, block, dtype, self._comm, self._stream),
                    "HcclAllGather",
                )

    def broadcast(self, values: Sequence[ort.OrtValue], root: int) -> None:
        """Each device value overwritten by rank ``root``'s (queued)."""
        for value in values:
            pointer, count, dtype = self._buffer(value)
            if count.value:
                self._check(
                    self._hccl.HcclBroadcast(
                        pointer, count, dtype, ctypes.c_uint32(root), self._comm, self._stream
                    ),
                    "HcclBroadcast",
                )

    def wait(self, what: str) -> None:
        """Waits for the queued collectives; a failed one raises ``HcclError`` naming ``what``."""
        self._check(self._acl.aclrtSynchronizeStream(self._stream), f"{what} (aclrtSynchronizeStream)")

    def close(self) -> None:
        self._native.OrtAscendOps_UnregisterHcclGroup(self.name.encode())
        if self._stream:
            self._acl.aclrtDestroyStream(self._stream)
            self._stream = ctypes.c_void_p()
        if self._comm:
            self._hccl.HcclCommDestroy(self._comm)
            self._comm = ctypes.c_void_p()
