"""The onnxscript LightningIndexer/LightningIndexerGrad references on three engines: slots past
K_t, finite differences and ONNX Runtime's warnings (their oracle tests, both lengths types among
them, are in test_lightning_indexer*.py over every engine)."""

import numpy as np
import onnxruntime as ort
import pytest

from engines import ENGINES
from lightning_indexer_checks import (
    check_finite_differences,
    check_grad,
)
from oracles import (
    F16,
    F32,
    lightning_indexer_grad_inputs,
)
from ort_ascend_ops.op_model import make_op_model


@pytest.mark.parametrize("engine", ENGINES)
def test_grad_ignores_slots_past_k_t(engine, rng):
    # sparse_mode 3 with S1 > S2: K_t = min(K, S2 - S1 + s + 1) = 0, 0, 1, 2, 3, 4, 4 for s = 0..6;
    # what the slots past K_t hold, even an index out of range, is never read.
    inputs = lightning_indexer_grad_inputs(rng, "BSND", 3, F32, np.int32, s1=7, s2=5)
    k_t = np.clip(5 - 7 + np.arange(7) + 1, 0, 4)
    past = np.arange(4) >= k_t[:, None]
    inputs["sparse_indices"] = np.where(past, np.int32(1000), inputs["sparse_indices"])
    check_grad(engine, inputs, "BSND", 3, F32)


@pytest.mark.parametrize("layout, mode", [("BSND", 3), ("TND", 0)])
def test_grad_matches_finite_differences_of_the_selected_scores(layout, mode, rng):
    check_finite_differences("ort", layout, mode, rng)


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
