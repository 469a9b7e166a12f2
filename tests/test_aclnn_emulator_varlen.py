"""The emulated aclnnFlashAttentionVarLenScore and aclnnFlashAttentionUnpaddingScoreGrad first
phases called directly: what they refuse in the lengths, layouts and statistics' shapes, with the
status code and a message naming the rule (the backend never passes such calls, so only a direct
call reaches these checks)."""

import ctypes

import numpy as np
import pytest

from ort_ascend_ops import aclnn_emulator

P, I64 = ctypes.c_void_p, ctypes.c_int64
NULLPTR, INVALID, TILING = 161001, 161002, 561002
FLOAT, ND = 0, 2
T1, T2, N1, N2, D = 7, 9, 2, 1, 8


@pytest.fixture
def lib(emulator):
    home = f"{aclnn_emulator.home()}/lib64"
    base, ops = ctypes.CDLL(f"{home}/libnnopbase.so"), ctypes.CDLL(f"{home}/libopapi_transformer.so")
    i64p = ctypes.POINTER(I64)
    base.aclCreateTensor.restype = P
    base.aclCreateTensor.argtypes = [i64p, ctypes.c_uint64, ctypes.c_int, i64p, I64, ctypes.c_int, i64p]
    base.aclCreateTensor.argtypes += [ctypes.c_uint64, P]
    base.aclDestroyTensor.argtypes = [P]
    base.aclCreateIntArray.restype = P
    base.aclCreateIntArray.argtypes = [i64p, ctypes.c_uint64]
    base.aclDestroyIntArray.argtypes = [P]
    base.aclDestroyAclOpExecutor.argtypes = [P]
    emulator.aclrtMalloc.argtypes = [ctypes.POINTER(P), ctypes.c_size_t, ctypes.c_int]
    emulator.aclrtFree.argtypes = [P]
    emulator.aclGetRecentErrMsg.restype = ctypes.c_char_p
    # scale, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode
    scalars = [ctypes.c_double, ctypes.c_double, I64, I64, I64, ctypes.c_char_p, I64, I64]
    # (tensors and arrays before the scalars, output tensors after; then workspaceSize, executor)
    for name, before, after in [
        ("aclnnFlashAttentionScoreGetWorkspaceSize", 8, 4),
        ("aclnnFlashAttentionVarLenScoreGetWorkspaceSize", 10, 4),
        ("aclnnFlashAttentionUnpaddingScoreGradGetWorkspaceSize", 15, 4),
    ]:
        getattr(ops, name).argtypes = [P] * before + scalars + [P] * (after + 2)
    made, blocks = [], []

    def tensor(shape):
        block = P()
        assert emulator.aclrtMalloc(ctypes.byref(block), int(np.prod(shape)) * 4, 0) == 0
        blocks.append(block)
        dims = (I64 * len(shape))(*shape)
        strides = (I64 * len(shape))(*(int(x) for x in np.cumprod((1, *shape[:0:-1]))[::-1]))
        t = base.aclCreateTensor(dims, len(shape), FLOAT, strides, 0, ND, dims, len(shape), block)
        made.append((base.aclDestroyTensor, t))
        return t

    def array(values):
        a = base.aclCreateIntArray((I64 * len(values))(*values), len(values))
        made.append((base.aclDestroyIntArray, a))
        return a

    yield type("Lib", (), {"tensor": tensor, "array": array, "base": base, "ops": ops, "acl": emulator})
    for destroy, obj in made:
        destroy(obj)
    for block in blocks:
        emulator.aclrtFree(block)


def forward(
    lib, ends_q=(3, 7), ends_kv=(4, 9), *, layout=b"TND", sparse_mode=0, stats=(T1, N1, 8), arrays=None
):
    """aclnnFlashAttentionVarLenScoreGetWorkspaceSize's status and message."""
    q_len, kv_len = arrays or (None if e is None else lib.array(e) for e in (ends_q, ends_kv))
    q, out = lib.tensor((T1, N1, D)), lib.tensor((T1, N1, D))
    k, v = lib.tensor((T2, N2, D)), lib.tensor((T2, N2, D))
    size, executor = ctypes.c_uint64(), P()
    code = lib.ops.aclnnFlashAttentionVarLenScoreGetWorkspaceSize(
        q, k, v, None, None, None, None, None, q_len, kv_len, 0.5, 1.0, 2**31 - 1, 2**31 - 1, N1, layout, 0,
        sparse_mode, lib.tensor(stats), lib.tensor(stats), None, out, ctypes.byref(size), ctypes.byref(executor)
    )  # fmt: skip
    if code == 0:
        lib.base.aclDestroyAclOpExecutor(executor)
    return code, (lib.acl.aclGetRecentErrMsg() or b"").decode()


def test_valid_call_prepares(lib):
    assert forward(lib)[0] == 0


@pytest.mark.parametrize(
    ("kwargs", "code", "rule"),
    [
        (
            {"ends_q": (4, 3, 7), "ends_kv": (4, 4, 9)},
            TILING,
            "actualSeqQLenOptional must be cumulative ends",
        ),
        ({"ends_q": (3, 6)}, TILING, "actualSeqQLenOptional ends at 6 but T is 7"),
        ({"ends_kv": (9,)}, TILING, "must count the same B"),
        ({"ends_kv": None}, NULLPTR, "actualSeqKvLenOptional is NULL"),
        ({"ends_q": ()}, INVALID, "must hold 1 to 20000 values"),
        ({"ends_q": (5, 7), "sparse_mode": 3}, TILING, "sparseMode 3 needs S1 <= S2 in every batch; batch 0"),
        ({"layout": b"BSND"}, INVALID, "not supported (TND only)"),
        ({"stats": (N1, T1, 8)}, TILING, "[T1, N1, 8]"),
    ],
    ids=["decreasing", "short", "counts", "null", "empty", "mode3-s1>s2", "layout", "stats-NT8"],
)
def test_refusals_name_the_rule(lib, kwargs, code, rule):
    got, message = forward(lib, **kwargs)
    assert got == code
    assert message.startswith("aclnnFlashAttentionVarLenScoreGetWorkspaceSize") and rule in message


def test_destroyed_array_is_refused(lib):
    q_len, kv_len = lib.array((3, 7)), lib.array((4, 9))
    stale = lib.base.aclCreateIntArray((I64 * 2)(3, 7), 2)
    assert lib.base.aclDestroyIntArray(stale) == 0
    code, message = forward(lib, arrays=(stale, kv_len))
    assert code == INVALID and "not a live aclIntArray" in message
    assert forward(lib, arrays=(q_len, kv_len))[0] == 0


def test_plain_functions_refuse_tnd(lib):
    q, k, v = lib.tensor((T1, N1, D)), lib.tensor((T2, N2, D)), lib.tensor((T2, N2, D))
    stats, size, executor = lib.tensor((T1, N1, 8)), ctypes.c_uint64(), P()
    code = lib.ops.aclnnFlashAttentionScoreGetWorkspaceSize(
        q, k, v, None, None, None, None, None, 0.5, 1.0, 2**31 - 1, 2**31 - 1, N1, b"TND", 0, 0, stats, stats,
        None, lib.tensor((T1, N1, D)), ctypes.byref(size), ctypes.byref(executor)
    )  # fmt: skip
    assert code == INVALID and "VarLen" in lib.acl.aclGetRecentErrMsg().decode()


def test_grad_checks_the_lengths_too(lib):
    q, dy, att = (lib.tensor((T1, N1, D)) for _ in range(3))
    k, v = lib.tensor((T2, N2, D)), lib.tensor((T2, N2, D))
    stats = lib.tensor((T1, N1, 8))
    dq, dk, dv = lib.tensor((T1, N1, D)), lib.tensor((T2, N2, D)), lib.tensor((T2, N2, D))
    size, executor = ctypes.c_uint64(), P()
    code = lib.ops.aclnnFlashAttentionUnpaddingScoreGradGetWorkspaceSize(
        q, k, v, dy, None, None, None, None, stats, stats, None, att, None, lib.array((3, 7)),
        lib.array((9, 4)), 0.5, 1.0, 2**31 - 1, 2**31 - 1, N1, b"TND", 0, 0, dq, dk, dv, None,
        ctypes.byref(size), ctypes.byref(executor)
    )  # fmt: skip
    message = lib.acl.aclGetRecentErrMsg().decode()
    assert code == TILING and "actualSeqKvLenOptional must be cumulative ends" in message
