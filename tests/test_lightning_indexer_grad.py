"""LightningIndexerGrad against the float64 oracle on every engine over layouts, sparse modes,
dtypes and index types, and edges; the native kernel against the inlined reference, hostile
indices and lengths, and determinism across threads."""

import numpy as np
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

from cases import raw_outputs
from engines import ENGINES, on, run
from harness import bits
from lightning_indexer_checks import (
    EDGES,
    GRAD_TYPES,
    MODES,
    aclnn_inputs,
    check_finite_differences,
    check_grad,
)
from oracles import BF16, F16, F32, TOL, assert_close, lightning_indexer_grad_inputs

ALL_TYPES = [(t, i) for t in (F32, F16, BF16) for i in (np.int32, np.int64)]


@pytest.mark.parametrize(
    "engine, layout, mode, t, index_type",
    [
        *(
            on("native", lay, m, t, i, id=f"{t.name}-{np.dtype(i).name}-{lay}-{m}")
            for t, i in ALL_TYPES
            for lay, m in MODES
        ),
        # aclnnLightningIndexerGrad takes float16 and bfloat16, int32 indices, at the vendor's sizes.
        *(
            on("aclnn", lay, m, t, np.int32, id=f"{lay}-{m}-{t.name}")
            for lay, m in MODES
            for t in (F16, BF16)
        ),
        *(
            on(engine, lay, m, t, i, id=f"{t.name}-{np.dtype(i).name}-{lay}-{m}")
            for engine in ENGINES
            for t, i in GRAD_TYPES
            for lay, m in MODES
        ),
    ],
)
def test_matches_oracle(engine, layout, mode, t, index_type, rng, request):
    if engine == "aclnn":
        emulator = request.getfixturevalue("emulator")
        inputs = aclnn_inputs(rng, layout, mode, t)
    else:
        inputs = lightning_indexer_grad_inputs(rng, layout, mode, t, index_type)
    check_grad(engine, inputs, layout, mode, t)
    if engine == "aclnn":
        assert emulator.aclemu_calls(b"aclnnLightningIndexerGrad") == 1


@pytest.mark.parametrize("lengths_type", [np.int32, np.int64], ids=lambda p: np.dtype(p).name)
@pytest.mark.parametrize("engine", ["native", *(on(e) for e in ENGINES)])
def test_tnd_lengths_of_either_integer_type(engine, lengths_type, rng):
    inputs = lightning_indexer_grad_inputs(rng, "TND", 3, F32, np.int32, lengths_dtype=lengths_type)
    check_grad(engine, inputs, "TND", 3, F32)


@pytest.mark.parametrize("engine", ["native", *(on(e) for e in ENGINES)])
@pytest.mark.parametrize("layout, mode, sizes", [*EDGES, ("BSND", 0, {"k": 0})])
def test_edges(engine, layout, mode, sizes, rng):
    check_grad(
        engine, lightning_indexer_grad_inputs(rng, layout, mode, F32, np.int64, **sizes), layout, mode, F32
    )


def test_larger_geometry_against_the_oracle(rng):
    # Enough tokens and slots for several d_key strips and GEMMs of useful size.
    inputs = lightning_indexer_grad_inputs(
        rng, "BSND", 3, F32, np.int32, batch=2, s1=24, s2=300, n1=8, d=32, k=64
    )
    check_grad("native", inputs, "BSND", 3, F32)


@pytest.mark.parametrize("t", [F32, BF16], ids=str)
@pytest.mark.parametrize("layout, mode", [("BSND", 0), ("TND", 3)])
def test_many_slots_and_key_strips_with_repeated_keys(layout, mode, t, rng):
    # More than 64 slots and more than 256 key rows: the kernel's slot blocks and key strips, with
    # keys picked twice by one token (their d_key contributions add up).
    sizes = {"k": 300, "s1": 3, "s2": 700, "lengths_q": (2, 5), "lengths_k": (650, 1300), "n1": 4, "d": 16}
    inputs = lightning_indexer_grad_inputs(rng, layout, mode, t, np.int32, **sizes)
    indices = inputs["sparse_indices"].reshape(-1, 300)
    indices[:, 150:160] = np.where(indices[:, :10] >= 0, indices[:, :10], indices[:, 150:160])
    check_grad("native", inputs, layout, mode, t)


@pytest.mark.parametrize("t", [F32, BF16], ids=str)
@pytest.mark.parametrize("layout, mode", [("BSND", 0), ("TND", 3)])
def test_tokens_taken_in_pieces_and_rows_in_blocks(layout, mode, t, rng):
    # 16,384 heads: 300 slots of per-slot state exceed the kernel's chunk budget, so each token is
    # taken in pieces of its slots, d_weights and d_query carried over; D = 4,096: key rows are
    # gathered 64 at a time. The same bits on any thread count.
    sizes = {"k": 300, "s1": 2, "s2": 400, "lengths_q": (1, 3), "lengths_k": (350, 700)}
    for n1, d in ((16384, 4), (2, 4096)):
        inputs = lightning_indexer_grad_inputs(rng, layout, mode, t, np.int32, **sizes, n1=n1, d=d)
        check_grad("native", inputs, layout, mode, t)
        attrs = {"head_num": n1, "layout": layout, "sparse_mode": mode}
        runs = [run("native", "LightningIndexerGrad", inputs, attrs, threads=n) for n in (1, 2, 4)]
        assert all([bits(o) for o in run] == [bits(o) for o in runs[0]] for run in runs[1:])


@pytest.mark.parametrize("layout, mode", [("BSND", 3), ("TND", 0)])
def test_backward_matches_finite_differences_of_the_forward(layout, mode, rng):
    check_finite_differences("native", layout, mode, rng)


@pytest.mark.parametrize("layout, mode", [("BSND", 3), ("TND", 0)])
def test_native_and_inlined_reference_agree(layout, mode, rng):
    inputs = lightning_indexer_grad_inputs(rng, layout, mode, F32, np.int64)
    attrs = {"head_num": 3, "layout": layout, "sparse_mode": mode}
    native = run("native", "LightningIndexerGrad", inputs, attrs)
    inlined = run("portable", "LightningIndexerGrad", inputs, attrs)
    for out, ref in zip(native, inlined, strict=True):
        assert_close(out, ref.astype(np.float64), TOL[F32])


@pytest.mark.parametrize("deterministic", [0, 1])
@pytest.mark.parametrize("t", [F32, BF16], ids=str)
def test_bit_identical_for_any_thread_count(deterministic, t, rng):
    # Few key rows, many tokens: the same d_key rows are hit from many tokens and threads.
    inputs = lightning_indexer_grad_inputs(
        rng, "BSND", 0, t, np.int32, batch=1, s1=64, s2=12, n1=4, d=16, k=8
    )
    attrs = {"head_num": 4, "layout": "BSND", "sparse_mode": 0, "deterministic": deterministic}
    runs = [run("native", "LightningIndexerGrad", inputs, attrs, threads=n) for n in (1, 2, 3, 1)]
    for other in runs[1:]:
        assert [bits(a) for a in other] == [bits(a) for a in runs[0]]


def _small(index_type=np.int32, **changes):
    """A valid BSND call (B=1, S1=2, S2=5, N1=2, D=4, K=3) with `changes` applied."""
    inputs = {
        "query": np.ones((1, 2, 2, 4), np.float32),
        "key": np.ones((1, 5, 1, 4), np.float32),
        "dy": np.ones((1, 2, 3), np.float32),
        "sparse_indices": np.zeros((1, 2, 3), index_type),
        "weights": np.ones((1, 2, 2), np.float32),
    }
    return inputs | changes


OUTPUTS = raw_outputs("LightningIndexerGrad")


@pytest.mark.parametrize(
    "index_type, bad",
    [
        (np.int32, 2**31 - 1),
        (np.int32, -(2**31)),
        (np.int32, 5),
        (np.int32, -2),
        (np.int64, 2**63 - 1),
        (np.int64, -(2**63)),
    ],
    ids=str,
)
def test_hostile_index_is_an_error_naming_op_token_and_index(index_type, bad):
    indices = np.zeros((1, 2, 3), index_type)
    indices[0, 1, 2] = bad
    attrs = {"head_num": 2, "layout": "BSND", "sparse_mode": 0}
    with pytest.raises(InvalidArgument) as error:
        run("native", "LightningIndexerGrad", _small(sparse_indices=indices), attrs, raw=OUTPUTS)
    message = str(error.value)
    assert "LightningIndexerGrad" in message and "token 1" in message and str(bad) in message
    # The process goes on.
    assert run("native", "LightningIndexerGrad", _small(index_type), attrs, raw=OUTPUTS)[0].shape == (
        1,
        2,
        2,
        4,
    )


def _tnd(lengths_q, lengths_k):
    return {
        "query": np.ones((4, 2, 4), np.float32),
        "key": np.ones((6, 1, 4), np.float32),
        "dy": np.ones((4, 3), np.float32),
        "sparse_indices": np.zeros((4, 3), np.int32),
        "weights": np.ones((4, 2), np.float32),
        "actual_seq_lengths_query": np.array(lengths_q, np.int64),
        "actual_seq_lengths_key": np.array(lengths_k, np.int64),
    }


@pytest.mark.parametrize(
    "inputs, attrs, rule",
    [
        (_tnd([1, 3], [2, 6]), {}, "ends at 3 but the tensor has 4 rows"),
        (_tnd([3, 1, 4], [2, 3, 6]), {}, "non-decreasing"),
        (_tnd([-1, 4], [2, 6]), {}, "non-decreasing"),
        (_tnd([4], [2, 6]), {}, "one value per batch"),
        (_tnd([1, 4], [2, 2**40]), {}, "ends at 1099511627776"),
        (_small(), {"layout": "BNSD"}, "attribute 'layout'"),
        (_small(), {"sparse_mode": 1}, "attribute 'sparse_mode' is 1"),
        (_small(), {"head_num": 3}, "attribute 'head_num' is 3"),
        (_small(key=np.ones((1, 5, 2, 4), np.float32)), {}, "one head"),
        (
            _small(dy=np.ones((1, 2, 4), np.float32)),
            {},
            "input 'sparse_indices' has shape [1,2,3]; it must be [1,2,4]",
        ),
        (_small(weights=np.ones((1, 2, 3), np.float32)), {}, "input 'weights'"),
        (
            _small() | {"actual_seq_lengths_query": np.array([2]), "actual_seq_lengths_key": np.array([5])},
            {},
            "layout BSND takes no input",
        ),
    ],
    ids=[
        "lengths short",
        "lengths decreasing",
        "negative length",
        "batch counts differ",
        "huge length",
        "layout",
        "sparse mode",
        "head num",
        "two key heads",
        "dy and indices disagree on K",
        "weights shape",
        "BSND with lengths",
    ],
)
def test_bad_input_is_an_ort_error_naming_op_and_rule(inputs, attrs, rule):
    layout = "TND" if "actual_seq_lengths_query" in inputs and inputs["query"].ndim == 3 else "BSND"
    attrs = {"head_num": 2, "layout": layout, "sparse_mode": 0} | attrs
    with pytest.raises(InvalidArgument) as error:
        run("native", "LightningIndexerGrad", inputs, attrs, raw=OUTPUTS)
    assert "LightningIndexerGrad" in str(error.value) and rule in str(error.value)
