"""Many threads at once: separate sessions (the library registered once per session) and one
session shared by all, each result equal bit for bit to the single-threaded run. ONNX Runtime
releases the GIL while it runs, so the kernels really overlap."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from cases import CASES
from harness import bits
from oracles import BF16
from ort_ascend_ops import make_op_model, make_session

THREADS = 8
RUNS = 6


CALLS = {op: cases.concurrency() for op, cases in CASES.items()}


def model_of(op):
    inputs, attrs = CALLS[op]
    types = {name: (a.dtype, [None] * a.ndim) for name, a in inputs.items()}
    return make_op_model(op, types, attrs)


def fingerprint(outputs):
    return [bits(o) for o in outputs]


@pytest.mark.parametrize("op", list(CALLS))
def test_separate_sessions_on_many_threads_match_the_single_threaded_run(op):
    inputs, _ = CALLS[op]
    model = model_of(op)
    want = fingerprint(make_session(model, threads=1).run(inputs))

    def work(threads):
        session = make_session(model, threads=threads)
        return [fingerprint(session.run(inputs)) for _ in range(RUNS)]

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(work, [1, 2] * (THREADS // 2)))
    assert all(run == want for runs in results for run in runs)


@pytest.mark.parametrize("op", list(CALLS))
def test_one_session_shared_by_many_threads_matches_the_single_threaded_run(op):
    inputs, _ = CALLS[op]
    model = model_of(op)
    want = fingerprint(make_session(model, threads=1).run(inputs))
    shared = make_session(model, threads=2)
    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(lambda _: fingerprint(shared.run(inputs)), range(THREADS * RUNS)))
    assert all(run == want for run in results)


def test_threads_mixing_ops_and_failures_on_one_session_each():
    """Valid and failing calls of every op interleaved across threads: failures stay with their
    call and leave the others' results intact."""
    sessions = {op: make_session(model_of(op), threads=2) for op in CALLS}
    wants = {op: fingerprint(sessions[op].run(CALLS[op][0])) for op in CALLS}
    bad_x = {"x": np.ones((4, 7), BF16), "gamma": np.ones(8, BF16)}

    def work(i):
        op = list(CALLS)[i % len(CALLS)]
        if i % 3 == 0:
            try:
                sessions["RmsNorm"].run(bad_x)
            except Exception as error:  # noqa: BLE001 - the type is checked below
                return "RmsNorm" in str(error) and type(error).__module__.startswith("onnxruntime")
            return False
        return fingerprint(sessions[op].run(CALLS[op][0])) == wants[op]

    with ThreadPoolExecutor(THREADS) as pool:
        assert all(pool.map(work, range(THREADS * RUNS * 2)))
