"""Run by tests/test_scratch.py in a child process: `python scratch_check.py CASE THREADS`.

Runs one call of CASE, a shape whose scratch used to grow with T1 x S2, K x D or K x N1, checks
its outputs against the float64 oracle and prints, as JSON, the peak growth of resident memory
during the call and the bytes of its inputs and outputs.
"""

import json
import sys

import numpy as np

from oracles import F32, TOL, assert_close, lightning_indexer_grad_oracle
from ort_ascend_ops import make_op_model, make_session
from ort_ascend_ops.runtime import ortvalue_view


def indexer_grad(rng, tokens, s2, n1, d, k):
    inputs = {
        "query": rng.standard_normal((1, tokens, n1, d), dtype=np.float32),
        "key": rng.standard_normal((1, s2, 1, d), dtype=np.float32),
        "dy": rng.standard_normal((1, tokens, k), dtype=np.float32),
        "sparse_indices": rng.integers(0, s2, (1, tokens, k), dtype=np.int32),
        "weights": rng.standard_normal((1, tokens, n1), dtype=np.float32),
    }

    def check(outputs):
        refs = lightning_indexer_grad_oracle(**inputs, layout="BSND", sparse_mode=0)
        for out, ref in zip(outputs, refs, strict=True):
            assert_close(out, ref, TOL[F32])

    return "LightningIndexerGrad", {"head_num": n1, "layout": "BSND", "sparse_mode": 0}, inputs, check


def indexer(rng, tokens, s2, n1, k, checked):
    """`checked`: the first tokens compared with the oracle (scoring every key in float64 is the
    slow part)."""
    # Integers small enough that every sum stays below 2^24, so that float32 scores are exact and
    # the ranking (ties to the lower key) is the oracle's to the last place.
    reach = min(1000, 2**24 // (16 * n1))
    inputs = {
        "query": rng.integers(-4, 5, (1, tokens, n1, 1)).astype(np.float32),
        "key": rng.integers(-reach, reach + 1, (1, s2, 1, 1)).astype(np.float32),
        "weights": rng.integers(0, 5, (1, tokens, n1)).astype(np.float32),
    }

    def check(outputs):
        indices, values = outputs
        q, key, w = (inputs[n].astype(np.float64) for n in ("query", "key", "weights"))
        columns = max(1, (1 << 22) // n1)  # keys per block of the float64 scores
        for t in range(checked):
            scores = np.concatenate(
                [
                    w[0, t] @ np.maximum(q[0, t] @ key[0, c : c + columns, 0].T, 0)
                    for c in range(0, s2, columns)
                ]
            )
            # The k best by (score descending, key ascending), among the keys at or above the k-th
            # score: the same as sorting all of them.
            candidates = np.nonzero(scores >= np.partition(scores, s2 - k)[s2 - k])[0]
            best = candidates[np.lexsort((candidates, -scores[candidates]))][:k]
            np.testing.assert_array_equal(indices[0, t], best)
            np.testing.assert_array_equal(values[0, t], scores[best])

    return "LightningIndexer", {"layout": "BSND", "sparse_mode": 0, "sparse_count": k}, inputs, check


CASES = {
    # 8,192 tokens of one slot over 10M key rows: a strips-sized array per token was 2.5 GiB.
    "indexer_grad_many_keys": lambda rng: indexer_grad(rng, 8192, 10_000_000, 1, 1, 1),
    # 2,048 slots of D = 32K over four key rows: a gathered panel of K x D was 256 MiB per token.
    "indexer_grad_wide": lambda rng: indexer_grad(rng, 2, 4, 1, 1 << 15, 1 << 11),
    # 64 heads over 4M keys: the scores of all keys were 1 GiB per token.
    "indexer_many_keys": lambda rng: indexer(rng, 2, 1 << 22, 64, 2048, checked=1),
    # 16,384 heads over 8K keys: 512 MiB of scores per token.
    "indexer_many_heads": lambda rng: indexer(rng, 2, 1 << 13, 16384, 2048, checked=2),
}


def status_kib(field):
    with open("/proc/self/status") as status:
        return int(status.read().split(field + ":")[1].split()[0])


def main(case, threads):
    op, attrs, inputs, check = CASES[case](np.random.default_rng(0))
    types = {name: (a.dtype, [None] * a.ndim) for name, a in inputs.items()}
    session = make_session(make_op_model(op, types, attrs), threads=threads)
    feeds = {name: ortvalue_view(array) for name, array in inputs.items()}
    # The peak since now, from the kernel's count (ru_maxrss would not do: a child inherits its
    # parent's peak through exec).
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    before = status_kib("VmRSS")
    values = session.ort.run_with_ort_values(session.output_names, feeds)
    growth = (status_kib("VmHWM") - before) * 1024
    outputs = [value.numpy() for value in values]
    check(outputs)
    tensors = sum(a.nbytes for a in inputs.values()) + sum(o.nbytes for o in outputs)
    print(json.dumps({"growth": growth, "tensors": tensors}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
