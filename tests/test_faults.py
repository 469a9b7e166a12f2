"""A failure inside a kernel's parallel tasks (here an allocation the address space cannot hold)
is an ONNX Runtime error naming the op, on any intra-op thread count, and the session stays
usable: neither a crash of ORT's thread pool nor a hang. Each case runs in a child process of its
own (tests/fault_check.py), which must exit normally: one session per process, as sessions that
came and went leave free heap space that a capped allocation could take without mapping."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cases import CASES
from harness import bits
from oracles import F32, TOL, assert_close, lightning_indexer_grad_inputs, lightning_indexer_grad_oracle
from ort_ascend_ops import make_op_model, make_session

THREADS = [1, 2, 4]
REPEATS = 3


# The ops whose kernels allocate inside their tasks (their cases have a ``fault``). RmsNorm and
# RmsNormGrad allocate only before theirs, on the calling thread, where an exception has always been
# an error. Every thread count runs in one child per op (a session each, fresh inputs each): the
# child's imports dominate.
@pytest.mark.parametrize("op", [op for op, cases in CASES.items() if cases.fault is not None])
def test_allocation_failure_inside_tasks_is_an_error_and_the_session_goes_on(op):
    script = Path(__file__).with_name("fault_check.py")
    # A fixed mmap threshold: glibc otherwise raises it after the first large free and serves later
    # large blocks from heap space it had already mapped, which the cap cannot see.
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(1 << 20))
    result = subprocess.run(
        [sys.executable, str(script), op, ",".join(map(str, THREADS)), str(REPEATS)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "ok", result.stdout
    assert [line for line in result.stdout.splitlines() if line.startswith("ok: ")] == [
        f"ok: {threads} threads" for threads in THREADS
    ], result.stdout


def test_d_key_is_summed_once_on_any_thread_count():
    """Every slot of every token selects one of three key rows, so each d_key row sums thousands of
    terms over many strip tasks: an index run twice would show against the oracle, and any
    difference in who ran what against the single-threaded bits."""
    rng = np.random.default_rng(11)
    inputs = lightning_indexer_grad_inputs(
        rng, "BSND", 0, F32, np.int32, batch=1, s1=300, s2=600, n1=4, d=32, k=40
    )
    inputs["sparse_indices"] = rng.choice([5, 300, 599], inputs["sparse_indices"].shape).astype(np.int32)
    types = {name: (a.dtype, [None] * a.ndim) for name, a in inputs.items()}
    model = make_op_model("LightningIndexerGrad", types, {"head_num": 4, "layout": "BSND", "sparse_mode": 0})
    refs = lightning_indexer_grad_oracle(**inputs, layout="BSND", sparse_mode=0)
    runs = {threads: make_session(model, threads=threads).run(inputs) for threads in THREADS}
    for out, ref in zip(runs[1], refs, strict=True):
        assert_close(out, ref, TOL[F32])
    for threads in THREADS[1:]:
        assert [bits(o) for o in runs[threads]] == [bits(o) for o in runs[1]]
