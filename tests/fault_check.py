"""Run by tests/test_faults.py in a child process: `python fault_check.py CASE THREADS REPEATS`,
THREADS a comma-separated list of intra-op thread counts (one session each, in turn: the child's
start-up, mostly imports, costs more than the checks).

The kernel of CASE is made to fail allocating inside its parallel tasks: once ORT, the session and
the inputs are in place, the address space is capped just above what is mapped plus the outputs
(ORT's arena is off, so it allocates them as they are), below what each task allocates. REPEATS
times, that call must raise ONNX Runtime's error naming the op and the allocation failure, and the
same session must then give the float64 oracle's results on a small valid input. Exits non-zero on
the first mismatch; a crash or a hang is what this guards against. Needs MALLOC_MMAP_THRESHOLD_
set (see test_faults.py).
"""

import resource
import sys

import numpy as np

from oracles import (
    F32,
    ROPE_LAYOUTS,
    TOL,
    assert_close,
    lightning_indexer_grad_inputs,
    lightning_indexer_grad_oracle,
    lightning_indexer_oracle,
    rope_grad_oracle,
    rope_inputs,
    rope_oracle,
)
from ort_ascend_ops import make_op_model, make_session, session_options
from ort_ascend_ops.runtime import ortvalue_view

MiB = 1 << 20
# What a call may map beyond what is mapped before it, besides its tasks' scratch: ORT's own
# bookkeeping and the kernel's small buffers. Every case's tasks each allocate twice this or more.
HEADROOM = 8 * MiB


def randn(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32)


def indexer(rng):
    # Two tokens over 4M keys, keeping 2M: each task's candidates (2 x K at most) take 32 MiB.
    s2, k = 1 << 22, 1 << 21
    failing = {
        "query": randn(rng, (1, 2, 1, 1)),
        "key": randn(rng, (1, s2, 1, 1)),
        "weights": randn(rng, (1, 2, 1)),
    }
    output_bytes = 2 * k * 8
    attrs = {"layout": "BSND", "sparse_mode": 0, "sparse_count": k}
    # One token (its outputs are K wide too).
    grad = lightning_indexer_grad_inputs(rng, "BSND", 0, F32, np.int32, batch=1, s1=1)
    valid = {n: grad[n] for n in ("query", "key", "weights")}

    def check(results):
        indices, values = results
        ref_indices, ref_values = lightning_indexer_oracle(**valid, **attrs)
        np.testing.assert_array_equal(indices, ref_indices)
        assert_close(values, ref_values, TOL[F32])

    return "LightningIndexer", attrs, failing, output_bytes, valid, check


def indexer_grad(rng):
    # Two tokens with a 4M head dim over two key rows: each task gathers (and sums d_key for) one
    # 16 MiB key row at a time.
    d = 1 << 22
    failing = {
        "query": randn(rng, (1, 2, 1, d)),
        "key": randn(rng, (1, 2, 1, d)),
        "dy": randn(rng, (1, 2, 4)),
        "sparse_indices": np.array([[[0, 1, -1, 1], [1, 0, 0, -1]]], np.int32),
        "weights": randn(rng, (1, 2, 1)),
    }
    output_bytes = 2 * (2 * d + 1) * 4
    attrs = {"head_num": 1, "layout": "BSND", "sparse_mode": 0}
    valid = lightning_indexer_grad_inputs(rng, "BSND", 0, F32, np.int32, n1=1)

    def check(results):
        refs = lightning_indexer_grad_oracle(**valid, layout="BSND", sparse_mode=0)
        for out, ref in zip(results, refs, strict=True):
            assert_close(out, ref, TOL[F32])

    return "LightningIndexerGrad", attrs, failing, output_bytes, valid, check


def rope_family(op, names, d):
    def case(rng):
        failing = {name: randn(rng, (1, 2, 1, d)) for name in names}
        output_bytes = len(OUTPUTS[op]) * 2 * d * 4
        valid = rope_inputs(rng, ROPE_LAYOUTS[3], F32, *names)

        def check(results):
            if op == "RotaryPositionEmbedding":
                refs = [rope_oracle(**valid, mode=0)]
            else:
                refs = rope_grad_oracle(valid["dy"], valid["cos"], valid["sin"], valid.get("x"), 0)
            for out, ref in zip(results, refs, strict=False):
                assert_close(out, ref, TOL[F32])

        return op, {"mode": 0}, failing, output_bytes, valid, check

    return case


OUTPUTS = {
    "RotaryPositionEmbedding": ["y"],
    "RotaryPositionEmbeddingGrad": ["dx", "dcos", "dsin"],
}

# Two cos rows, so two tasks, each holding its row's float32 tables: 2 x D floats for the forward
# (cos, sin) and the grad without x, 4 x D with x (dcos, dsin too).
CASES = {
    "LightningIndexer": indexer,
    "LightningIndexerGrad": indexer_grad,
    "RotaryPositionEmbedding": rope_family("RotaryPositionEmbedding", ("x", "cos", "sin"), 1 << 22),
    "RotaryPositionEmbeddingGrad": rope_family(
        "RotaryPositionEmbeddingGrad", ("dy", "cos", "sin", "x"), 1 << 21
    ),
}


def mapped() -> int:
    with open("/proc/self/status") as status:
        return int(status.read().split("VmSize:")[1].split()[0]) * 1024


def fails_capped(call, room):
    """The exception `call` raises with the address space capped `room` above what is mapped."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mapped() + room, hard))
    try:
        call()
    except Exception as error:  # noqa: BLE001 - checked by the caller
        return error
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return None


def main(case, threads, repeats):
    op, attrs, failing, output_bytes, valid, check = CASES[case](np.random.default_rng(0))
    types = {name: (a.dtype, [None] * a.ndim) for name, a in failing.items()}
    feeds = {name: ortvalue_view(array) for name, array in failing.items()}
    options = session_options(threads=threads)
    options.enable_cpu_mem_arena = False
    session = make_session(make_op_model(op, types, attrs), options=options)
    check(session.run(valid))
    for _ in range(repeats):
        error = fails_capped(
            lambda: session.ort.run_with_ort_values(session.output_names, feeds), output_bytes + HEADROOM
        )
        assert error is not None, f"{op} ran with its tasks' scratch out of reach"
        assert type(error).__module__.startswith("onnxruntime"), repr(error)
        assert op in str(error) and "bad_alloc" in str(error), str(error)
        check(session.run(valid))
    print(f"ok: {threads} threads", flush=True)


if __name__ == "__main__":
    for threads in sys.argv[2].split(","):
        main(sys.argv[1], int(threads), int(sys.argv[3]))
    print("ok")
