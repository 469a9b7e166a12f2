"""What the aclnn backend's tests share: running an op against the host emulator, checking that
a refused call was refused by the backend itself, before any vendor function ran, and what the
vendor does with FlashAttentionScore(Grad)'s TND."""

import ctypes

import numpy as np
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument

from engines import run
from oracles import BF16, F16, F32
from ort_ascend_ops import aclnn_emulator

P, I64C = ctypes.c_void_p, ctypes.c_int64
ACL_FLOAT, ACL_ND = 0, 2


class FirstPhases:
    """The emulator's libraries for calling aclnn first phases directly, as the backend never does:
    ``base`` (libnnopbase: tensors, lists, int arrays, executors), ``ops`` (``library``, a
    libopapi_*.so, whose first phases the caller types) and ``acl`` (the runtime's controls), and
    ND tensors over device memory, all released by ``close``."""

    def __init__(self, emulator, library):
        home = f"{aclnn_emulator.home()}/lib64"
        self.base, self.ops, self.acl = (
            ctypes.CDLL(f"{home}/libnnopbase.so"),
            ctypes.CDLL(f"{home}/{library}"),
            emulator,
        )
        i64p = ctypes.POINTER(I64C)
        base = self.base
        base.aclCreateTensor.restype = P
        base.aclCreateTensor.argtypes = [i64p, ctypes.c_uint64, ctypes.c_int, i64p, I64C, ctypes.c_int, i64p]
        base.aclCreateTensor.argtypes += [ctypes.c_uint64, P]
        base.aclCreateTensorList.restype = P
        base.aclCreateTensorList.argtypes = [ctypes.POINTER(P), ctypes.c_uint64]
        base.aclCreateIntArray.restype = P
        base.aclCreateIntArray.argtypes = [i64p, ctypes.c_uint64]
        for name in (
            "aclDestroyTensor",
            "aclDestroyTensorList",
            "aclDestroyIntArray",
            "aclDestroyAclOpExecutor",
        ):
            getattr(base, name).argtypes = [P]
        emulator.aclrtMalloc.argtypes = [ctypes.POINTER(P), ctypes.c_size_t, ctypes.c_int]
        emulator.aclrtFree.argtypes = [P]
        emulator.aclGetRecentErrMsg.restype = ctypes.c_char_p
        self.made, self.blocks = [], []  # (destroy, object); device memory

    def tensor(self, shape, dtype=ACL_FLOAT, strides=None, storage=None):
        """An ND aclTensor of ``shape`` (aclDataType ``dtype``) over fresh device memory holding
        ``storage`` (default: ``shape``), with ``strides`` (default: contiguous)."""
        storage = storage or shape
        block = P()
        assert self.acl.aclrtMalloc(ctypes.byref(block), max(int(np.prod(storage)), 1) * 8, 0) == 0
        self.blocks.append(block)
        strides = strides or [int(np.prod(shape[i + 1 :])) for i in range(len(shape))]
        dims, store, steps = ((I64C * len(v))(*v) for v in (shape, storage, strides))
        t = self.base.aclCreateTensor(dims, len(shape), dtype, steps, 0, ACL_ND, store, len(storage), block)
        self.made.append((self.base.aclDestroyTensor, t))
        return t

    def tensor_list(self, t):
        """A list of the one tensor ``t``, which then owns it."""
        self.made.remove((self.base.aclDestroyTensor, t))
        self.made.append((self.base.aclDestroyTensorList, self.base.aclCreateTensorList((P * 1)(t), 1)))
        return self.made[-1][1]

    def int_array(self, values):
        a = self.base.aclCreateIntArray((I64C * len(values))(*values), len(values))
        self.made.append((self.base.aclDestroyIntArray, a))
        return a

    def status(self, code, executor):
        """A first phase's status and the runtime's message; its executor released."""
        if code == 0:
            self.base.aclDestroyAclOpExecutor(executor)
        return code, (self.acl.aclGetRecentErrMsg() or b"").decode()

    def close(self):
        for destroy, obj in self.made:
            destroy(obj)
        for block in self.blocks:
            self.acl.aclrtFree(block)


def host_waits(emulator):
    """Times our library waited for a stream (the CANN execution provider's own per-run wait
    aside)."""
    return emulator.aclemu_calls_from(b"aclrtSynchronizeStream", b"libort_ascend_ops")


def assert_refused(
    emulator, op_name, inputs, attrs, match, *, error=InvalidArgument, raw_outputs=None, symbol=None
):
    """The backend refuses the call with an error naming the op and `match`, and no aclnn
    function ran (`symbol`, aclnn<op_name> by default)."""
    with pytest.raises(error, match=match) as raised:
        run("aclnn", op_name, inputs, attrs, raw=raw_outputs)
    assert op_name in str(raised.value)
    symbol = symbol or f"aclnn{op_name}"
    assert emulator.aclemu_calls(f"{symbol}GetWorkspaceSize".encode()) == 0
    assert emulator.aclemu_calls(symbol.encode()) == 0


# The functions FlashAttentionScore(Grad) call in TND, beside the plain ones of the other layouts.
FA_VARLEN = {
    "FlashAttentionScore": "aclnnFlashAttentionVarLenScore",
    "FlashAttentionScoreGrad": "aclnnFlashAttentionUnpaddingScoreGrad",
}

# TND cases beside the oracle tests' (id, dtype, flash_attention_inputs keywords): MQA, a batch
# without rows or keys, one with keys only.
FA_TND_CASES = [
    ("TND-mqa-f16", F16, {"n1": 4, "n2": 1}),
    ("TND-empty-batch-bf16", BF16, {"lengths_q": (3, 3, 7), "lengths_kv": (4, 4, 9)}),
    (
        "TND-empty-batch-mode3-int32",
        F32,
        {"lengths_q": (0, 2, 6), "lengths_kv": (3, 5, 9), "sparse_mode": 3, "lengths_dtype": np.int32},
    ),
]


# Calls with nothing to compute, which fill their outputs without a vendor call: (layout, sizes
# for flash_attention_inputs), and their ids.
FA_EMPTY_CASES = [
    ("BNSD", {"s2": 0}),
    ("BNSD", {"batch": 0}),
    ("BNSD", {"s1": 0}),
    ("TND", {"lengths_kv": (0, 0)}),
    ("TND", {"lengths_q": (0, 0)}),
]
FA_EMPTY_IDS = ["no-keys", "no-batch", "no-rows", "TND-no-keys", "TND-no-rows"]


def fa_symbol(op_name, layout):
    return FA_VARLEN[op_name] if layout == "TND" else f"aclnn{op_name}"


def fa_vendor_refuses(inputs, attrs):
    """TND with sparse_mode 3 and a batch of more query rows than keys: the VarLen page needs
    S1 <= S2 in every batch."""
    if attrs["input_layout"] != "TND" or attrs.get("sparse_mode") != 3:
        return False
    rows_q, rows_kv = (
        np.diff(inputs[k], prepend=0) for k in ("actual_seq_lengths_query", "actual_seq_lengths_kv")
    )
    return bool(np.any(rows_q > rows_kv))


__all__ = [
    "FA_EMPTY_CASES",
    "FA_EMPTY_IDS",
    "FA_TND_CASES",
    "FA_VARLEN",
    "Fail",
    "InvalidArgument",
    "assert_refused",
    "fa_symbol",
    "fa_vendor_refuses",
    "host_waits",
]
