"""GroupedMatmul against the float64 oracle on every engine (the kernels and the reference
functions), torch's _grouped_mm, and the contract's error rules."""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper

from engines import ENGINES, on, run
from harness import assert_capped_isa_matches_oracle
from oracles import (
    BF16,
    F32,
    GMM_CASES,
    GMM_TYPES,
    TOL,
    assert_close,
    grouped_matmul_inputs,
    grouped_matmul_oracle,
)
from ort_ascend_ops import DOMAIN, make_session
from ort_ascend_ops.training import build_training_model

OP = "GroupedMatmul"
CASES = [
    on(engine, counts, k, n, t, tw, id=f"{len(counts)}x{sum(counts)}-{k}-{n}-{t.name}-t{tw}")
    for engine in ["native", "aclnn", "portable", *ENGINES]
    for counts, k, n in GMM_CASES
    for t in GMM_TYPES
    for tw in (0, 1)
]


def forward_inputs(rng, counts, k, n, t, tw):
    inputs = grouped_matmul_inputs(rng, counts, k, n, t, tw)
    return {name: inputs[name] for name in ("x", "weight", "group_list")}


@pytest.mark.parametrize("engine, counts, k, n, t, tw", CASES)
def test_matches_oracle(engine, counts, k, n, t, tw, rng, request):
    emulator = request.getfixturevalue("emulator") if engine == "aclnn" else None
    inputs = forward_inputs(rng, counts, k, n, t, tw)
    calls = emulator.aclemu_calls(b"aclnnGroupedMatmulV4") if emulator else 0
    (y,) = run(engine, OP, inputs, {"transpose_weight": tw})
    if engine != "ort":  # ORT outputs went through a Cast to float32
        assert np.asarray(y).dtype == t
    ref = grouped_matmul_oracle(**inputs, transpose_weight=tw)
    assert np.asarray(y).shape == ref.shape
    if k == 0:
        assert not np.asarray(y).astype(np.float64).any()
    elif ref.size:
        assert_close(y, ref, TOL[t])
    if emulator:  # one vendor call; none where there is nothing to multiply (it refuses empty tensors)
        assert emulator.aclemu_calls(b"aclnnGroupedMatmulV4") == calls + (ref.size > 0 and k > 0)


@pytest.mark.parametrize("t", GMM_TYPES, ids=str)
def test_gives_torch_grouped_mm(t, rng):
    """torch's _grouped_mm takes the groups' cumulative ends; ours their counts."""
    inputs = forward_inputs(rng, (40, 0, 25, 63), 32, 48, t, 0)
    ends = torch.from_numpy(np.cumsum(inputs["group_list"]).astype(np.int32))
    x, w = (torch.from_numpy(inputs[n].astype(np.float32)) for n in ("x", "weight"))
    want = torch._grouped_mm(x, w, offs=ends).numpy().astype(np.float64)
    (y,) = run("native", OP, inputs)
    assert_close(y, want, TOL[t])


def test_bits_do_not_depend_on_threads(rng):
    inputs = forward_inputs(rng, (700, 3, 0, 530), 64, 1100, BF16, 1)
    one = run("native", OP, inputs, {"transpose_weight": 1}, threads=1)[0]
    for threads in (2, 3):
        np.testing.assert_array_equal(
            one, run("native", OP, inputs, {"transpose_weight": 1}, threads=threads)[0]
        )


@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_capped_isa_matches_oracle(isa):
    """bfloat16 GroupedMatmul and its weight gradient widened to float32 (no AVX-512 BF16)."""
    assert_capped_isa_matches_oracle("grouped_matmul", isa)


REFUSED = [  # (x shape, weight shape, counts, transpose_weight, words)
    ((6, 4), (2, 4, 3), [2, 3], 0, "group_list.*add(ing)? up to"),
    ((6, 4), (2, 4, 3), [7, -1], 0, "group_list.*>= 0"),
    ((6, 4), (3, 4, 3), [2, 4], 0, "group_list.*expert"),
    ((6, 4), (2, 5, 3), [2, 4], 0, "weight.*x.shape\\[1\\]"),
    ((6, 4), (2, 4, 3), [2, 4], 1, "weight.*x.shape\\[1\\]"),
    ((2, 3, 4), (2, 4, 3), [1, 1], 0, "x.*rank 2"),
    ((6, 4), (4, 3), [6], 0, "weight.*rank 3"),
]


@pytest.mark.parametrize("engine", ["native", "portable"])
@pytest.mark.parametrize("xs, ws, counts, tw, words", REFUSED, ids=lambda v: str(v))
def test_refuses_broken_rules(engine, xs, ws, counts, tw, words):
    inputs = {"x": np.ones(xs, F32), "weight": np.ones(ws, F32), "group_list": np.array(counts, np.int64)}
    with pytest.raises(Exception, match=f"(?s){OP}.*{words}"):
        run(engine, OP, inputs, {"transpose_weight": tw}, raw={"y": F32})


@pytest.mark.parametrize("engine", ["native", "portable"])
@pytest.mark.parametrize("tw", [0, 1])
def test_gradient_rule_gives_torch_autograd(engine, tw, rng):
    """loss = sum(GroupedMatmul(x, weight) * r) differentiated by build_training_model: dx by a
    GroupedMatmul of the transposed weights, dweight by a GroupedMatmulWeightGrad."""
    counts = (6, 0, 9, 5)
    inputs = forward_inputs(rng, counts, 8, 12, F32, tw)
    r = rng.standard_normal((sum(counts), 12)).astype(F32)
    nodes = [
        helper.make_node(OP, ["x", "weight", "group_list"], ["y"], domain=DOMAIN, transpose_weight=tw),
        helper.make_node("Mul", ["y", "r"], ["t"]),
        helper.make_node("ReduceSum", ["t"], ["loss"], keepdims=0),
    ]
    graph_inputs = [
        helper.make_tensor_value_info(
            name, TensorProto.INT64 if a.dtype == np.int64 else TensorProto.FLOAT, a.shape
        )
        for name, a in (inputs | {"r": r}).items()
    ]
    graph = helper.make_graph(
        nodes, OP, graph_inputs, [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])]
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 23), helper.make_opsetid(DOMAIN, 1)], ir_version=10
    )
    training = build_training_model(model, "loss", ["x", "weight"])
    assert [n.op_type for n in training.graph.node if n.domain == DOMAIN] == [OP, OP, f"{OP}WeightGrad"]
    _, dx, dweight = make_session(training, native=engine == "native").run(inputs | {"r": r})
    x = torch.from_numpy(inputs["x"]).double().requires_grad_()
    w = torch.from_numpy(inputs["weight"]).double().requires_grad_()
    b = np.concatenate([[0], np.cumsum(counts)])
    y = torch.cat([x[b[g] : b[g + 1]] @ (w[g].T if tw else w[g]) for g in range(len(counts))])
    (y * torch.from_numpy(r).double()).sum().backward()
    assert_close(dx, x.grad.numpy(), TOL[F32])
    assert_close(dweight, w.grad.numpy(), TOL[F32])
