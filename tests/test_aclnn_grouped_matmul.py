"""GroupedMatmul through the aclnn backend (host emulator): aclnnGroupedMatmulV4's limits checked
before the vendor is called, the calls the backend makes, and the emulated first phases of the
family's functions (V4 and aclnnGroupedMatmulAddV2) called directly, which refuse the same limits
(the oracle test of every engine is in test_grouped_matmul.py)."""

import ctypes
import re

import numpy as np
import pytest
from aclnn_checks import FirstPhases, assert_refused

from engines import run
from oracles import BF16, F16, F32, TOL, assert_close, grouped_matmul_inputs, grouped_matmul_oracle

OP, V4 = "GroupedMatmul", "aclnnGroupedMatmulV4"


def gmm_inputs(counts, k, n, t=F32, tw=0, rng=None):
    """Inputs of ones (or random with `rng`) for `counts` rows per group."""
    if rng is not None:
        inputs = grouped_matmul_inputs(rng, counts, k, n, t, tw)
        return {name: inputs[name] for name in ("x", "weight", "group_list")}
    shape = (len(counts), n, k) if tw else (len(counts), k, n)
    return {
        "x": np.ones((sum(counts), k), t),
        "weight": np.ones(shape, t),
        "group_list": np.array(counts, np.int64),
    }


def test_more_than_1024_groups_are_refused(emulator):
    inputs = gmm_inputs([1] + [0] * 1024, 2, 2)
    assert_refused(
        emulator, OP, inputs, {}, "1025 counts; aclnnGroupedMatmulV4 takes at most 1024", symbol=V4
    )


def test_an_axis_past_int32_once_aligned_is_refused(emulator):
    # Empty, so nothing is allocated: the rule is the vendor's, checked whatever the output.
    inputs = {"x": np.ones((2**31 - 1, 0), F32), "weight": np.ones((1, 0, 0), F32)}
    inputs["group_list"] = np.array([2**31 - 1], np.int64)
    assert_refused(emulator, OP, inputs, {}, "under 2\\^31 - 1 once rounded up to 32 bytes", symbol=V4)


@pytest.mark.parametrize(
    "k, n, tw, words",
    [(65536, 1, 0, "'x' has K = 65536"), (1, 65536, 0, "'weight' has N = 65536"), (65536, 1, 1, "'x' has K")],
    ids=["K", "N", "K-transposed"],
)
def test_a_last_axis_of_65536_is_refused_on_a2_and_a3(k, n, tw, words, emulator):
    assert_refused(emulator, OP, gmm_inputs([1], k, n, F16, tw), {"transpose_weight": tw}, words, symbol=V4)


def test_n_of_65536_runs_with_the_weight_transposed(emulator, rng):
    """Transposed, the weight's last axis as the vendor reads it is K."""
    inputs = gmm_inputs([2, 1], 3, 65536, F32, 1, rng)
    (y,) = run("aclnn", OP, inputs, {"transpose_weight": 1})
    assert_close(y, grouped_matmul_oracle(**inputs, transpose_weight=1), TOL[F32])


def test_ascend_950_has_no_last_axis_limit(emulator, rng):
    emulator.aclemu_set_soc(b"Ascend950PR")
    inputs = gmm_inputs([1, 2], 65536, 2, BF16, 0, rng)
    (y,) = run("aclnn", OP, inputs)
    assert_close(y, grouped_matmul_oracle(**inputs), TOL[BF16])


@pytest.mark.parametrize(
    "soc, words",
    [(b"Ascend310P3", "FRACTAL_NZ only"), (b"Ascend910A", "not supported on")],
    ids=["310P", "910A"],
)
def test_other_products_are_refused(soc, words, emulator):
    emulator.aclemu_set_soc(soc)
    assert_refused(emulator, OP, gmm_inputs([2, 1], 4, 4, F16), {}, words, symbol=V4)


def test_broken_counts_are_refused_before_any_kernel(emulator):
    """The counts are read back from the device and checked before any kernel runs."""
    inputs = gmm_inputs([2, 1], 4, 4) | {"group_list": np.array([-1, 4], np.int64)}
    assert_refused(emulator, OP, inputs, {}, "count 0 is negative", symbol=V4)


@pytest.mark.parametrize("tw", [0, 1])
@pytest.mark.parametrize("t", [F32, F16, BF16], ids=str)
def test_one_vendor_call_reads_the_weight_in_place(t, tw, emulator, rng):
    """The transposed weight is a strided view of the stored [E, N, K]: no copy, no permute."""
    inputs = gmm_inputs([3, 0, 5, 0], 8, 12, t, tw, rng)
    (y,) = run("aclnn", OP, inputs, {"transpose_weight": tw})
    assert_close(y, grouped_matmul_oracle(**inputs, transpose_weight=tw), TOL[t])
    assert emulator.aclemu_calls(V4.encode()) == 1
    for copy in (b"aclnnPermute", b"aclnnInplaceCopy", b"aclnnTranspose"):
        assert emulator.aclemu_calls(copy) == 0


def test_k_of_zero_fills_zeros_without_the_vendor(emulator):
    (y,) = run("aclnn", OP, gmm_inputs([4, 0, 2], 0, 6, BF16))
    assert y.shape == (6, 6) and not y.astype(np.float64).any()
    assert emulator.aclemu_calls(V4.encode()) == 0
    assert emulator.aclemu_calls(b"aclnnInplaceFillScalar") == 1


@pytest.mark.parametrize(
    "counts, n", [((0, 0), 5), ((3, 2), 0), ((), 4)], ids=["no-rows", "no-columns", "no-groups"]
)
def test_an_empty_output_calls_nothing(counts, n, emulator):
    inputs = gmm_inputs(list(counts), 3, n, F16)
    (y,) = run("aclnn", OP, inputs)
    assert y.shape == (sum(counts), n)
    assert emulator.aclemu_calls(V4.encode()) == emulator.aclemu_calls(b"aclnnInplaceFillScalar") == 0


# The emulated first phases called directly -----------------------------------------------------

P, I64 = ctypes.c_void_p, ctypes.c_int64
NULLPTR, INVALID, TILING = 161001, 161002, 561002
DTYPE = {F32: 0, F16: 1, BF16: 27, np.int64: 9}


@pytest.fixture
def lib(emulator):
    phases = FirstPhases(emulator, "libopapi_transformer.so")
    # x, weight, 6 optional lists, groupListOptional, 3 optional lists; 4 integers; out, 2 lists
    phases.ops.aclnnGroupedMatmulV4GetWorkspaceSize.argtypes = [P] * 12 + [I64] * 4 + [P] * 5
    phases.ops.aclnnGroupedMatmulAddV2GetWorkspaceSize.argtypes = (
        [P] * 4 + [ctypes.c_bool] * 2 + [I64] * 2 + [P] * 2
    )
    yield phases
    phases.close()


def v4(lib, x, weight, out, groups, *, dtype=F32, group_type=0, split_item=3, act_type=0):
    """aclnnGroupedMatmulV4GetWorkspaceSize's status and message, for tensors given as (shape,
    strides, storage) or shapes."""
    views = [t if isinstance(t[0], tuple) else (t, None, None) for t in (x, weight, out)]
    made = [
        lib.tensor_list(lib.tensor(shape, DTYPE[dtype], strides, storage))
        for shape, strides, storage in views
    ]
    counts = lib.tensor((groups,), DTYPE[np.int64])
    size, executor = ctypes.c_uint64(), P()
    code = lib.ops.aclnnGroupedMatmulV4GetWorkspaceSize(
        made[0], made[1], *[None] * 6, counts, *[None] * 3, split_item, group_type, 1, act_type, made[2], None, None,
        ctypes.byref(size), ctypes.byref(executor),
    )  # fmt: skip
    return lib.status(code, executor)


def add_v2(lib, x, weight, groups, *, dtype=F16, transpose_x=True, y=None):
    """aclnnGroupedMatmulAddV2GetWorkspaceSize's status and message (x [K, M], weight [K, N])."""
    y_ref = lib.tensor(y or (groups, x[1], weight[1]), DTYPE[F32])
    size, executor = ctypes.c_uint64(), P()
    code = lib.ops.aclnnGroupedMatmulAddV2GetWorkspaceSize(
        lib.tensor(x, DTYPE[dtype]), lib.tensor(weight, DTYPE[dtype]), lib.tensor((groups,), DTYPE[np.int64]), y_ref, transpose_x, False,
        2, 1, ctypes.byref(size), ctypes.byref(executor),
    )  # fmt: skip
    return lib.status(code, executor)


def transposed(rows, cols):
    """[rows, cols] over the stored [cols, rows]: the vendor's transposed matrix."""
    return ((rows, cols), [1, rows], [cols, rows])


def test_v4_takes_what_the_backend_passes(lib):
    assert v4(lib, (6, 4), (2, 4, 3), (6, 3), 2)[0] == 0
    assert v4(lib, (6, 4), ((2, 4, 3), [12, 1, 4], [2, 3, 4]), (6, 3), 2)[0] == 0  # transposed weight
    assert v4(lib, transposed(4, 6), (6, 3), (2, 4, 3), 2, group_type=2)[0] == 0
    assert add_v2(lib, (6, 4), (6, 3), 2)[0] == 0


@pytest.mark.parametrize(
    "call, code, words",
    [
        (lambda lib: v4(lib, (6, 4), (1025, 4, 3), (6, 3), 1025), INVALID, "at most 1024"),
        (lambda lib: v4(lib, (1, 65536), (1, 65536, 1), (1, 1), 1, dtype=F16), INVALID, "under 65536"),
        (lambda lib: v4(lib, (1, 1), (1, 1, 65536), (1, 65536), 1, dtype=F16), INVALID, "under 65536"),
        (lambda lib: v4(lib, (6, 4), (2, 4, 3), (6, 3), 2, split_item=0), INVALID, "splitItem"),
        (lambda lib: v4(lib, (6, 4), (2, 4, 3), (6, 3), 2, act_type=1), INVALID, "actType"),
        (lambda lib: v4(lib, (6, 0), (2, 0, 3), (6, 3), 2), INVALID, "x\\[0\\] is empty"),
        (lambda lib: v4(lib, transposed(6, 4), (2, 4, 3), (6, 3), 2), INVALID, "must not be transposed"),
        (lambda lib: v4(lib, (4, 6), (6, 3), (2, 4, 3), 2, group_type=2), INVALID, "must be transposed"),
        (lambda lib: v4(lib, (6, 4), (2, 4, 3), (6, 3), 3), INVALID, "3 groups, weight\\[0\\] 2"),
        (lambda lib: add_v2(lib, (6, 4), (6, 3), 2, dtype=F32), INVALID, "x dtype"),
        (lambda lib: add_v2(lib, (6, 4), (6, 3), 2, transpose_x=False), INVALID, "transposeX must be true"),
        (lambda lib: add_v2(lib, (6, 4), (6, 3), 1025), INVALID, "at most 1024"),
        (lambda lib: add_v2(lib, (6, 4), (6, 3), 2, y=(2, 12)), INVALID, "\\[groups, M, N\\]"),
        (lambda lib: add_v2(lib, (1, 65536), (1, 1), 1), INVALID, "under 65536"),
    ],
    ids=[
        "v4-groups", "v4-K", "v4-N", "v4-split", "v4-activation", "v4-empty", "v4-x-transposed",
        "v4-x-not-transposed", "v4-groups-vs-weight", "add-f32", "add-x", "add-groups", "add-y", "add-M",
    ],
)  # fmt: skip
def test_the_emulator_refuses_the_pages_limits(lib, call, code, words):
    got, message = call(lib)
    assert got == code
    assert re.search(words, message), message


@pytest.mark.parametrize("soc, words", [(b"Ascend310P3", "FRACTAL_NZ"), (b"Ascend910A", "not supported")])
def test_the_emulator_refuses_other_products(lib, emulator, soc, words):
    emulator.aclemu_set_soc(soc)
    code, message = v4(lib, (6, 4), (2, 4, 3), (6, 3), 2, dtype=F16)
    assert code in (INVALID, TILING) and words in message
    assert add_v2(lib, (6, 4), (6, 3), 2)[0] == TILING
