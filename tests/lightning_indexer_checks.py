"""What the LightningIndexer tests of both paths share: the cases and the checks against the
float64 oracles."""

import numpy as np
import pytest

from engines import run
from oracles import (
    BF16,
    F16,
    F32,
    TOL,
    assert_close,
    lightning_indexer_grad_inputs,
    lightning_indexer_grad_oracle,
    lightning_indexer_oracle,
)

MODES = [("BSND", 0), ("BSND", 3), ("TND", 0), ("TND", 3)]  # (layout, sparse_mode)
# Every T with both index types would be 6; four pairs cover each T and each index type.
GRAD_TYPES = [(F32, np.int32), (F32, np.int64), (F16, np.int64), (BF16, np.int32)]
# Boundary shapes: K past S2 (-1 padding), S1 > S2 (mode 3 rows with K_t = 0), empty batches,
# and empty tensors.
EDGES = [
    ("BSND", 0, {"s2": 3, "k": 6}),
    ("BSND", 3, {"s1": 7, "s2": 5}),
    ("TND", 3, {"lengths_q": (3, 3, 7), "lengths_k": (0, 4, 9), "k": 6}),
    ("TND", 0, {"lengths_q": (0, 4, 4), "lengths_k": (2, 2, 5)}),
    ("BSND", 3, {"batch": 0}),
    ("TND", 0, {"lengths_q": (0,), "lengths_k": (0,)}),
]

# Sizes the vendor takes (D = 128), small enough for the emulator's plain loops.
ACLNN_SIZES = {"d": 128, "n1": 4, "k": 4, "s1": 5, "s2": 9, "lengths_q": (3, 7), "lengths_k": (4, 9)}


def aclnn_inputs(rng, layout, mode, t, **sizes):
    """LightningIndexerGrad inputs the aclnn kernels take: int32 indices and lengths, every
    counted slot holding a key (aclnnLightningIndexerGrad cannot skip one)."""
    return lightning_indexer_grad_inputs(
        rng, layout, mode, t, np.int32, lengths_dtype=np.int32, skip_fraction=0, **(ACLNN_SIZES | sizes)
    )


def forward_inputs(inputs):
    """The LightningIndexer inputs among LightningIndexerGrad's."""
    return {name: a for name, a in inputs.items() if name not in ("dy", "sparse_indices")}


def check_forward(engine, inputs, attrs, t):
    indices, values = run(engine, "LightningIndexer", inputs, attrs)
    ref_indices, ref_values = lightning_indexer_oracle(**inputs, **attrs)
    np.testing.assert_array_equal(indices, ref_indices)
    assert_close(values, ref_values, TOL[t])
    if engine != "ort":  # ORT outputs went through a Cast to float32
        assert (np.asarray(indices).dtype, np.asarray(values).dtype) == (np.int32, t)
    return indices, values


def check_grad(engine, inputs, layout, mode, t):
    attrs = {"head_num": inputs["query"].shape[-2], "layout": layout, "sparse_mode": mode}
    outputs = run(engine, "LightningIndexerGrad", inputs, attrs)
    refs = lightning_indexer_grad_oracle(**inputs, layout=layout, sparse_mode=mode)
    for out, ref in zip(outputs, refs, strict=True):
        assert_close(out, ref, TOL[t])
        if engine != "ort":
            assert np.asarray(out).dtype == t


def check_finite_differences(engine, layout, mode, rng):
    """The grad on `engine` against central differences of the forward's selected scores."""
    # L = sum(dy * sparse_values) with the selection held fixed is linear in weights and, as long
    # as no q . k changes sign, in query and key: a central difference with a step that flips no
    # sign and moves no selection is exact up to float32 rounding.
    inputs = lightning_indexer_grad_inputs(rng, layout, mode, F32, np.int32)
    forward = forward_inputs(inputs)
    attrs = {"layout": layout, "sparse_mode": mode, "sparse_count": 4}
    indices, _ = run(engine, "LightningIndexer", forward, attrs)
    grad_inputs = inputs | {"sparse_indices": indices.astype(np.int32)}
    grads = run(
        "ort", "LightningIndexerGrad", grad_inputs, {"head_num": 3, "layout": layout, "sparse_mode": mode}
    )
    q, k = (
        inputs["query"].reshape(-1, 3, 8).astype(np.float64),
        inputs["key"].reshape(-1, 8).astype(np.float64),
    )
    dots = np.abs(np.einsum("tjd,rd->tjr", q, k))

    def selected_loss(name, step):
        """L with inputs[name] moved by step, and whether the selection held."""
        picked, values = run(engine, "LightningIndexer", forward | {name: inputs[name] + step}, attrs)
        return np.array_equal(picked, indices), np.sum(values.astype(np.float64) * inputs["dy"])

    for name, grad in zip(["query", "key", "weights"], grads, strict=True):
        v = rng.standard_normal(inputs[name].shape).astype(np.float32)
        h = 1e-2
        if name != "weights":  # how fast each q . k moves along v
            moves = np.einsum(
                "tjd,rd->tjr", *((v.reshape(q.shape), k) if name == "query" else (q, v.reshape(k.shape)))
            )
            h = min(h, 0.5 * np.min(dots / np.abs(moves)))
        for _ in range(6):  # halve the step until no selection moves
            (held_plus, plus), (held_minus, minus) = (
                selected_loss(name, np.float32(s * h) * v) for s in (1, -1)
            )
            if held_plus and held_minus:
                break
            h /= 2
        assert held_plus and held_minus
        assert (plus - minus) / (2 * h) == pytest.approx(np.sum(grad.astype(np.float64) * v), rel=1e-3)
