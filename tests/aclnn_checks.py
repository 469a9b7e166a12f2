"""What the aclnn backend's tests share: running an op against the host emulator, checking that
a refused call was refused by the backend itself, before any vendor function ran, and what the
vendor does with FlashAttentionScore(Grad)'s TND."""

import numpy as np
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument

from engines import run
from oracles import BF16, F16, F32


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
