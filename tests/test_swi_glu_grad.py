"""SwiGluGrad against the float64 oracle on every engine, against torch autograd of
silu(gate) * up, the plain loops against the AVX2 paths, and the contract's error rules."""

import numpy as np
import pytest
import torch

from engines import ENGINES, on, run
from harness import assert_plain_loops_give_avx2_bits
from oracles import F32, GLU_SHAPES, GLU_TYPES, TOL, assert_close, swi_glu_grad_inputs, swi_glu_grad_oracle

OP = "SwiGluGrad"
CASES = [
    on(engine, shape, dim, t, id=f"{shape}-{dim}-{t.name}")
    for engine in ["native", "aclnn", "portable", *ENGINES]
    for shape, dim in GLU_SHAPES
    for t in GLU_TYPES
]


@pytest.mark.parametrize("engine, shape, dim, t", CASES)
def test_matches_oracle(engine, shape, dim, t, rng, request):
    emulator = request.getfixturevalue("emulator") if engine == "aclnn" else None
    inputs = swi_glu_grad_inputs(rng, shape, dim, t, scale=3.0)
    calls = emulator.aclemu_calls(b"aclnnSwiGluGrad") if emulator else 0
    (dx,) = run(engine, OP, inputs, {"dim": dim})
    if engine != "ort":
        assert np.asarray(dx).dtype == t
    ref = swi_glu_grad_oracle(**inputs, dim=dim)
    if ref.size:
        assert_close(dx, ref, TOL[t])
    assert np.asarray(dx).shape == ref.shape
    if emulator:
        assert emulator.aclemu_calls(b"aclnnSwiGluGrad") == calls + (ref.size > 0)


def test_gives_torch_autograd(rng):
    inputs = swi_glu_grad_inputs(rng, (3, 5, 2 * 64), -1, F32, scale=3.0)
    x = torch.from_numpy(inputs["x"]).requires_grad_()
    gate, up = x.chunk(2, dim=-1)
    (torch.nn.functional.silu(gate) * up).backward(torch.from_numpy(inputs["dy"]))
    (dx,) = run("native", OP, inputs)
    np.testing.assert_allclose(dx, x.grad.numpy(), rtol=1e-5, atol=1e-6)


def outputs(rng):
    out = []
    for t in GLU_TYPES:
        for shape, dim in [((3, 2 * 1111), -1), ((2, 6, 37), 1)]:
            out += run("native", OP, swi_glu_grad_inputs(rng, shape, dim, t, scale=4.0), {"dim": dim})
    return out


def test_the_plain_loops_give_the_avx2_paths_bits(tmp_path):
    assert_plain_loops_give_avx2_bits(outputs, tmp_path)


def _dy_wider(inputs):
    return inputs | {"dy": np.ones((4, 6), F32)}


def _dy_other_axis(inputs):
    return inputs | {"dy": np.ones((2, 6), F32)}


def _x_odd(inputs):
    return {"dy": np.ones((4, 3), F32), "x": np.ones((4, 7), F32)}


@pytest.mark.parametrize("engine", ["native", "portable"])
@pytest.mark.parametrize(
    "change, word",
    [(_dy_wider, "dy"), (_dy_other_axis, "dy"), (_x_odd, "two equal halves")],
    ids=["dy-not-halved", "dy-halved-elsewhere", "x-odd"],
)
def test_refuses_broken_rules(engine, change, word, rng):
    inputs = change(swi_glu_grad_inputs(rng, (4, 6), -1, F32))
    with pytest.raises(Exception, match=f"(?s){OP}.*{word}"):
        run(engine, OP, inputs, raw={"dx": F32})
