"""Resources: memory does not grow over 10,000 valid and 10,000 failing runs of every op; the
library keeps no writable global state beyond what its allow-list explains; and it unloads cleanly
when the last session holding it goes."""

import ctypes
import itertools
import mmap
import re
import subprocess
import sys
import textwrap

import pytest
from memory import assert_memory_flat

from cases import CASES
from ort_ascend_ops import get_library_path, make_op_model, make_session

RUNS = 10_000


@pytest.mark.parametrize("op", list(CASES))
def test_ten_thousand_valid_and_failing_runs_keep_memory_flat(op):
    valid, failing, attrs = CASES[op].resources()
    types = {name: (a.dtype, [None] * a.ndim) for name, a in valid.items()}
    session = make_session(make_op_model(op, types, attrs), threads=2)

    def both():
        session.run(valid)
        try:
            session.run(failing)
        except Exception as error:  # noqa: BLE001 - checked: it must be ORT's, naming the op
            assert op in str(error) and type(error).__module__.startswith("onnxruntime")
        else:
            raise AssertionError(f"{op} accepted the failing inputs")

    def block():
        for _ in range(RUNS // 10):
            both()

    assert_memory_flat(block, calls_per_block=2 * RUNS // 10)


# Writable data (.data, .bss) of the library's own code, each with its reason; anything else is
# mutable global state and fails the test. (Constant tables that hold pointers live in
# .data.rel.ro, which the loader makes read-only after relocation.)
ALLOWED_GLOBALS = {
    # Which kernel paths the CPU takes: computed once by a thread-safe function-local static.
    r"(guard variable for )?oao::use_avx2\(\)::avx2",
    r"(guard variable for )?oao::use_avx512\(\)::avx512",
    r"(guard variable for )?oao::use_avx512_bf16\(\)::bf16",
    # OpenBLAS is set to one thread once per process (std::call_once's flag).
    r"oao::single_threaded_blas\(\)::once",
    # The op table every session registering the library shares: built once, then only read.
    r"(guard variable for )?RegisterCustomOps::library",
    # The CANN libraries the aclnn backend opened: resolved once, then only read.
    r"(guard variable for )?oao::acl::Cann::get\(\)::cann",
    # The aclnn backend's causal mask for FlashAttentionScore's modes 2 and 3: built once, then only read.
    r"(guard variable for )?oao::fa_causal_mask\(\)::mask",
    # The standard ops' rows on the NPU (aclnn/standard/table.cc): built once, then only read.
    r"(guard variable for )?oao::standard::table\(\)::rows",
    # The device copies of the host scalars and constants aclnn nodes share (aclnn/uploads.cc): one
    # cache per process, behind its mutex, its slots per device and stream.
    r"(guard variable for )?oao::uploads::\(anonymous namespace\)::state\(\)::s",
    # The HCCL communicators the training API registered for the graph's all-reduce nodes
    # (aclnn/hccl.cc): one registry per process, behind its mutex, set between runs.
    r"(guard variable for )?oao::hccl::\(anonymous namespace\)::registry\(\)::groups",
    r"(guard variable for )?oao::hccl::\(anonymous namespace\)::registry_mutex\(\)::mu",
    # ORT's C++ API: the OrtApi table the library was registered with.
    r"Ort::Global<void>::api_",
}


def test_no_mutable_global_state_outside_the_allow_list():
    table = subprocess.run(
        ["objdump", "-t", "-C", get_library_path()], check=True, capture_output=True, text=True
    ).stdout
    writable = [
        line.split(None, 5)[-1]
        for line in table.splitlines()
        if re.search(r" \.(data|bss)\s", line) and re.search(r"oao::|Ort::|RegisterCustomOps", line)
    ]
    assert writable, "objdump listed no symbols: the check would pass vacuously"
    unexplained = [name for name in writable if not any(re.fullmatch(p, name) for p in ALLOWED_GLOBALS)]
    assert unexplained == []


def test_library_unloads_cleanly_after_its_sessions_go(tmp_path):
    script = textwrap.dedent(
        """
        import gc
        import os
        import numpy as np
        from ort_ascend_ops import make_op_model, make_session, get_library_path

        def loaded():
            with open("/proc/self/maps") as maps:
                return os.path.realpath(get_library_path()) in maps.read()

        types = {"x": (np.float32, [None, None]), "gamma": (np.float32, [None])}
        session = make_session(make_op_model("RmsNorm", types))
        session.run({"x": np.ones((2, 8), np.float32), "gamma": np.ones(8, np.float32)})
        assert loaded()
        del session
        gc.collect()
        print("unloaded" if not loaded() else "still mapped")
        """
    )
    # Outside the checkout, so that "-c" imports the package the tests run against.
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "unloaded", result.stdout + result.stderr


PAGE = 4096


@pytest.mark.parametrize("where", ["malloc", "python objects", "mapped pages"])
def test_the_memory_check_catches_a_leak(where):
    libc = ctypes.CDLL(None)
    libc.malloc.restype = libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    kept = []
    counter = itertools.count()

    def map_a_page_every_8_calls():  # 512 bytes per call
        if next(counter) % 8 == 0:
            page = libc.mmap(
                None, PAGE, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0
            )
            ctypes.memset(page, 1, PAGE)

    leak, message = {
        "malloc": (lambda: kept.append(libc.malloc(128)), "in-use bytes"),  # 128 bytes per call
        "python objects": (lambda: kept.append(bytes(95)), "Python kept"),  # one object per call
        "mapped pages": (map_a_page_every_8_calls, "resident memory"),
    }[where]

    def block():
        for _ in range(2 * RUNS // 10):
            leak()

    with pytest.raises(AssertionError, match=message):
        assert_memory_flat(block, calls_per_block=2 * RUNS // 10)
