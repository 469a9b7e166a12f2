"""Many threads at once: separate sessions (the library registered once per session) and one
session shared by all, each result equal bit for bit to the single-threaded run. ONNX Runtime
releases the GIL while it runs, so the kernels really overlap."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from harness import bits
from oracles import BF16, F32, lightning_indexer_grad_inputs, rms_norm_grad_inputs
from ort_ascend_ops import make_op_model, make_session

THREADS = 8
RUNS = 6


def cases():
    rng = np.random.default_rng(7)
    grad = lightning_indexer_grad_inputs(
        rng, "TND", 3, BF16, np.int64, lengths_q=(40, 96), lengths_k=(300, 700), n1=8, d=64, k=32
    )
    rope = {
        n: rng.standard_normal(s).astype(F32) for n, s in (("x", (2, 64, 8, 64)), ("cos", (1, 64, 1, 64)))
    }
    rope["sin"] = rng.standard_normal((1, 64, 1, 64)).astype(F32)
    rope_grad = {"dy": rope["x"], "cos": rope["cos"], "sin": rope["sin"], "x": rope["x"][::-1].copy()}
    return {
        "RmsNorm": ({"x": rng.standard_normal((512, 1000)).astype(BF16), "gamma": np.ones(1000, BF16)}, {}),
        "RmsNormGrad": (rms_norm_grad_inputs(rng, (512, 1000), (1000,), F32, F32), {}),
        "RotaryPositionEmbedding": (rope, {"mode": 1}),
        "RotaryPositionEmbeddingGrad": (rope_grad, {"mode": 0}),
        "LightningIndexer": (
            {
                n: grad[n]
                for n in ("query", "key", "weights", "actual_seq_lengths_query", "actual_seq_lengths_key")
            },
            {"layout": "TND", "sparse_mode": 3, "sparse_count": 32},
        ),
        "LightningIndexerGrad": (grad, {"head_num": 8, "layout": "TND", "sparse_mode": 3}),
    }


CASES = cases()


def model_of(op):
    inputs, attrs = CASES[op]
    types = {name: (a.dtype, [None] * a.ndim) for name, a in inputs.items()}
    return make_op_model(op, types, attrs)


def fingerprint(outputs):
    return [bits(o) for o in outputs]


@pytest.mark.parametrize("op", list(CASES))
def test_separate_sessions_on_many_threads_match_the_single_threaded_run(op):
    inputs, _ = CASES[op]
    model = model_of(op)
    want = fingerprint(make_session(model, threads=1).run(inputs))

    def work(threads):
        session = make_session(model, threads=threads)
        return [fingerprint(session.run(inputs)) for _ in range(RUNS)]

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(work, [1, 2] * (THREADS // 2)))
    assert all(run == want for runs in results for run in runs)


@pytest.mark.parametrize("op", list(CASES))
def test_one_session_shared_by_many_threads_matches_the_single_threaded_run(op):
    inputs, _ = CASES[op]
    model = model_of(op)
    want = fingerprint(make_session(model, threads=1).run(inputs))
    shared = make_session(model, threads=2)
    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(lambda _: fingerprint(shared.run(inputs)), range(THREADS * RUNS)))
    assert all(run == want for run in results)


def test_threads_mixing_ops_and_failures_on_one_session_each():
    """Valid and failing calls of every op interleaved across threads: failures stay with their
    call and leave the others' results intact."""
    sessions = {op: make_session(model_of(op), threads=2) for op in CASES}
    wants = {op: fingerprint(sessions[op].run(CASES[op][0])) for op in CASES}
    bad_x = {"x": np.ones((4, 7), BF16), "gamma": np.ones(8, BF16)}

    def work(i):
        op = list(CASES)[i % len(CASES)]
        if i % 3 == 0:
            try:
                sessions["RmsNorm"].run(bad_x)
            except Exception as error:  # noqa: BLE001 - the type is checked below
                return "RmsNorm" in str(error) and type(error).__module__.startswith("onnxruntime")
            return False
        return fingerprint(sessions[op].run(CASES[op][0])) == wants[op]

    with ThreadPoolExecutor(THREADS) as pool:
        assert all(pool.map(work, range(THREADS * RUNS * 2)))
