"""GroupedMatmulWeightGrad against the float64 oracle on every engine, torch autograd of
_grouped_mm, and the contract's error rules."""

import numpy as np
import pytest
import torch

from engines import ENGINES, on, run
from oracles import (
    BF16,
    F32,
    GMM_CASES,
    GMM_TYPES,
    TOL,
    assert_close,
    grouped_matmul_inputs,
    grouped_matmul_weight_grad_oracle,
)

OP = "GroupedMatmulWeightGrad"
CASES = [
    on(engine, counts, k, n, t, tw, id=f"{len(counts)}x{sum(counts)}-{k}-{n}-{t.name}-t{tw}")
    for engine in ["native", "aclnn", "portable", *ENGINES]
    for counts, k, n in GMM_CASES
    for t in GMM_TYPES
    for tw in (0, 1)
]


def grad_inputs(rng, counts, k, n, t, tw=0):
    inputs = grouped_matmul_inputs(rng, counts, k, n, t, tw)
    return {name: inputs[name] for name in ("x", "dy", "group_list")}


@pytest.mark.parametrize("engine, counts, k, n, t, tw", CASES)
def test_matches_oracle(engine, counts, k, n, t, tw, rng, request):
    if engine == "aclnn":
        request.getfixturevalue("emulator")
    inputs = grad_inputs(rng, counts, k, n, t, tw)
    (dw,) = run(engine, OP, inputs, {"transpose_weight": tw})
    if engine != "ort":  # ORT outputs went through a Cast to float32
        assert np.asarray(dw).dtype == t
    ref = grouped_matmul_weight_grad_oracle(**inputs, transpose_weight=tw)
    assert np.asarray(dw).shape == ref.shape
    empty = [g for g, c in enumerate(counts) if c == 0]
    assert not np.asarray(dw)[empty].astype(np.float64).any()  # an expert no row reached
    if np.linalg.norm(ref):
        assert_close(dw, ref, TOL[t])


@pytest.mark.parametrize("t", GMM_TYPES, ids=str)
@pytest.mark.parametrize("tw", [0, 1])
def test_gives_torch_autograd(t, tw, rng):
    """The weight gradient of torch's _grouped_mm (weight[e].T in it with transpose_weight)."""
    counts = (40, 0, 25, 700)
    inputs = grouped_matmul_inputs(rng, counts, 32, 48, t, tw)
    x = torch.from_numpy(inputs["x"].astype(np.float32))
    w = torch.from_numpy(inputs["weight"].astype(np.float32)).requires_grad_()
    ends = torch.from_numpy(np.cumsum(counts).astype(np.int32))
    y = torch._grouped_mm(x, w.transpose(1, 2) if tw else w, offs=ends)
    y.backward(torch.from_numpy(inputs["dy"].astype(np.float32)))
    grads = {name: inputs[name] for name in ("x", "dy", "group_list")}
    (dw,) = run("native", OP, grads, {"transpose_weight": tw})
    assert_close(dw, w.grad.numpy().astype(np.float64), TOL[t])


def test_bits_do_not_depend_on_threads(rng):
    inputs = grad_inputs(rng, (1300, 3, 0, 530), 300, 520, BF16)
    one = run("native", OP, inputs, threads=1)[0]
    for threads in (2, 3):
        np.testing.assert_array_equal(one, run("native", OP, inputs, threads=threads)[0])


REFUSED = [  # (x shape, dy shape, counts, words)
    ((6, 4), (6, 3), [2, 3], "group_list.*add(ing)? up to"),
    ((6, 4), (6, 3), [7, -1], "group_list.*>= 0"),
    ((6, 4), (5, 3), [2, 4], "dy.*rows"),
    ((2, 3, 4), (2, 3), [1, 1], "x.*rank 2"),
    ((6, 4), (6,), [6], "dy.*rank 2"),
    ((6, 4), (6, 3), [[6]], "group_list.*rank 1"),
]


@pytest.mark.parametrize("engine", ["native", "portable"])
@pytest.mark.parametrize("xs, ds, counts, words", REFUSED, ids=lambda v: str(v))
def test_refuses_broken_rules(engine, xs, ds, counts, words):
    inputs = {"x": np.ones(xs, F32), "dy": np.ones(ds, F32), "group_list": np.array(counts, np.int64)}
    with pytest.raises(Exception, match=f"(?s){OP}.*{words}"):
        run(engine, OP, inputs, raw={"dweight": F32})
