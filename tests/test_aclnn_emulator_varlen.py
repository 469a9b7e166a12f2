"""The emulated aclnnFlashAttentionVarLenScore and aclnnFlashAttentionUnpaddingScoreGrad first
phases called directly: what they refuse in the lengths, layouts and statistics' shapes, with the
status code and a message naming the rule (the backend never passes such calls, so only a direct
call reaches these checks)."""

import ctypes

import pytest
from aclnn_checks import FirstPhases

P, I64 = ctypes.c_void_p, ctypes.c_int64
NULLPTR, INVALID, TILING = 161001, 161002, 561002
T1, T2, N1, N2, D = 7, 9, 2, 1, 8


@pytest.fixture
def lib(emulator):
    phases = FirstPhases(emulator, "libopapi_transformer.so")
    # scale, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode
    scalars = [ctypes.c_double, ctypes.c_double, I64, I64, I64, ctypes.c_char_p, I64, I64]
    # (tensors and arrays before the scalars, output tensors after; then workspaceSize, executor)
    for name, before, after in [
        ("aclnnFlashAttentionScoreGetWorkspaceSize", 8, 4),
        ("aclnnFlashAttentionVarLenScoreGetWorkspaceSize", 10, 4),
        ("aclnnFlashAttentionUnpaddingScoreGradGetWorkspaceSize", 15, 4),
    ]:
        getattr(phases.ops, name).argtypes = [P] * before + scalars + [P] * (after + 2)
    yield phases
    phases.close()


def forward(
    lib, ends_q=(3, 7), ends_kv=(4, 9), *, layout=b"TND", sparse_mode=0, stats=(T1, N1, 8), arrays=None
):
    """aclnnFlashAttentionVarLenScoreGetWorkspaceSize's status and message."""
    q_len, kv_len = arrays or (None if e is None else lib.int_array(e) for e in (ends_q, ends_kv))
    q, out = lib.tensor((T1, N1, D)), lib.tensor((T1, N1, D))
    k, v = lib.tensor((T2, N2, D)), lib.tensor((T2, N2, D))
    size, executor = ctypes.c_uint64(), P()
    code = lib.ops.aclnnFlashAttentionVarLenScoreGetWorkspaceSize(
        q, k, v, None, None, None, None, None, q_len, kv_len, 0.5, 1.0, 2**31 - 1, 2**31 - 1, N1, layout, 0,
        sparse_mode, lib.tensor(stats), lib.tensor(stats), None, out, ctypes.byref(size), ctypes.byref(executor)
    )  # fmt: skip
    return lib.status(code, executor)


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
    q_len, kv_len = lib.int_array((3, 7)), lib.int_array((4, 9))
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
        q, k, v, dy, None, None, None, None, stats, stats, None, att, None, lib.int_array((3, 7)),
        lib.int_array((9, 4)), 0.5, 1.0, 2**31 - 1, 2**31 - 1, N1, b"TND", 0, 0, dq, dk, dv, None,
        ctypes.byref(size), ctypes.byref(executor)
    )  # fmt: skip
    message = lib.acl.aclGetRecentErrMsg().decode()
    assert code == TILING and "actualSeqKvLenOptional must be cumulative ends" in message
