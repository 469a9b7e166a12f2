"""The onnxscript LightningIndexer/LightningIndexerGrad references against float64 NumPy oracles
written from the contract, on three engines."""

import numpy as np
import onnxruntime as ort
import pytest

from engines import ENGINES
from lightning_checks import (
    EDGES,
    GRAD_TYPES,
    MODES,
    check_finite_differences,
    check_forward,
    check_grad,
    forward_inputs,
)
from oracles import (
    BF16,
    F16,
    F32,
    lightning_indexer_grad_inputs,
)
from ort_ascend_ops.op_model import make_op_model


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout, mode", MODES)
@pytest.mark.parametrize("t", [F32, F16, BF16], ids=str)
def test_lightning_indexer(engine, layout, mode, t, rng):
    inputs = forward_inputs(lightning_indexer_grad_inputs(rng, layout, mode, t, np.int32))
    check_forward(engine, inputs, {"layout": layout, "sparse_mode": mode, "sparse_count": 4}, t)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout, mode", MODES)
@pytest.mark.parametrize("t, index_type", GRAD_TYPES, ids=lambda p: np.dtype(p).name)
def test_lightning_indexer_grad(engine, layout, mode, t, index_type, rng):
    inputs = lightning_indexer_grad_inputs(rng, layout, mode, t, index_type)
    check_grad(engine, inputs, layout, mode, t)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout, mode, sizes", EDGES)
def test_lightning_indexer_edges(engine, layout, mode, sizes, rng):
    inputs = forward_inputs(lightning_indexer_grad_inputs(rng, layout, mode, F32, np.int32, **sizes))
    attrs = {"layout": layout, "sparse_mode": mode, "sparse_count": sizes.get("k", 4)}
    check_forward(engine, inputs, attrs, F32)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout, mode, sizes", [*EDGES, ("BSND", 0, {"k": 0})])
def test_lightning_indexer_grad_edges(engine, layout, mode, sizes, rng):
    check_grad(
        engine, lightning_indexer_grad_inputs(rng, layout, mode, F32, np.int64, **sizes), layout, mode, F32
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_grad_ignores_slots_past_k_t(engine, rng):
    # sparse_mode 3 with S1 > S2: K_t = min(K, S2 - S1 + s + 1) = 0, 0, 1, 2, 3, 4, 4 for s = 0..6;
    # what the slots past K_t hold, even an index out of range, is never read.
    inputs = lightning_indexer_grad_inputs(rng, "BSND", 3, F32, np.int32, s1=7, s2=5)
    k_t = np.clip(5 - 7 + np.arange(7) + 1, 0, 4)
    past = np.arange(4) >= k_t[:, None]
    inputs["sparse_indices"] = np.where(past, np.int32(1000), inputs["sparse_indices"])
    check_grad(engine, inputs, "BSND", 3, F32)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("layout", ["BSND", "TND"])
def test_lightning_indexer_ties_go_to_the_lower_key(engine, layout, rng):
    # Small integers make every score exact, whatever the order of the sums, so equal scores are
    # exactly equal in float32 and float64 alike; there are many of them, zeros from the ReLU too.
    inputs = forward_inputs(lightning_indexer_grad_inputs(rng, layout, 0, F32, np.int32))
    for name in ("query", "key", "weights"):
        inputs[name] = rng.integers(-1, 2, inputs[name].shape).astype(np.float32)
    attrs = {"layout": layout, "sparse_mode": 0, "sparse_count": 9}
    indices, values = (np.asarray(a).reshape(-1, 9) for a in check_forward(engine, inputs, attrs, F32))
    tied = (values[:, 1:] == values[:, :-1]) & (indices[:, 1:] != -1)
    assert tied.sum() >= 10, tied.sum()
    assert np.all(indices[:, 1:][tied] > indices[:, :-1][tied])


@pytest.mark.parametrize("layout, mode", [("BSND", 3), ("TND", 0)])
def test_grad_matches_finite_differences_of_the_selected_scores(layout, mode, rng):
    check_finite_differences("ort", layout, mode, rng)


@pytest.mark.parametrize("engine", ENGINES)
def test_tnd_int32_lengths(engine, rng):
    inputs = lightning_indexer_grad_inputs(rng, "TND", 3, F32, np.int32, lengths_dtype=np.int32)
    check_grad(engine, inputs, "TND", 3, F32)
    check_forward(engine, forward_inputs(inputs), {"layout": "TND", "sparse_mode": 3, "sparse_count": 4}, F32)


def test_ort_loads_without_warnings(capfd):
    # ONNX Runtime only reports some problems of an inlined function in warnings on stderr: wrong
    # static shapes inferred for in-graph shape arithmetic, or a name captured by an If branch that
    # it cannot rename.
    lengths = {"actual_seq_lengths_query": (np.int64, ["B"]), "actual_seq_lengths_key": (np.int64, ["B"])}
    cases = [  # layout, query, key, weights, dy and sparse_indices, lengths
        ("BSND", [2, 5, 3, 8], [2, 9, 1, 8], [2, 5, 3], [2, 5, 4], {}),
        ("BSND", ["B", "S1", 3, 8], ["B", "S2", 1, 8], ["B", "S1", 3], ["B", "S1", 4], {}),
        ("TND", [7, 3, 8], [9, 1, 8], [7, 3], [7, 4], lengths),
        ("TND", ["T1", 3, 8], ["T2", 1, 8], ["T1", 3], ["T1", "K"], lengths),
    ]
    for t in (F32, F16):
        for layout, q, k, w, dy, extra in cases:
            forward = {"query": (t, q), "key": (t, k), "weights": (t, w)} | extra
            grad = forward | {"dy": (t, dy), "sparse_indices": (np.int32, dy)}
            for mode in (0, 3):
                for op_name, types, attrs in [
                    ("LightningIndexer", forward, {"sparse_count": 4}),
                    ("LightningIndexerGrad", grad, {"head_num": 3}),
                ]:
                    model = make_op_model(op_name, types, attrs | {"layout": layout, "sparse_mode": mode})
                    ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    err = capfd.readouterr().err
    assert "MergeShapeInfo" not in err and "CanUpdateImplicitInputNameInSubgraphs" not in err, err
