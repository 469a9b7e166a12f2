"""SwiGlu against the float64 oracle on every engine (the kernels and the reference functions), the
plain loops against the AVX2 paths, torch's silu(gate) * up, and the contract's error rules."""

import numpy as np
import pytest
import torch

from engines import ENGINES, on, run
from harness import assert_plain_loops_give_avx2_bits
from oracles import BF16, F32, GLU_SHAPES, GLU_TYPES, TOL, assert_close, swi_glu_grad_inputs, swi_glu_oracle

OP = "SwiGlu"
CASES = [
    on(engine, shape, dim, t, id=f"{shape}-{dim}-{t.name}")
    for engine in ["native", "aclnn", "portable", *ENGINES]
    for shape, dim in GLU_SHAPES
    for t in GLU_TYPES
]


@pytest.mark.parametrize("engine, shape, dim, t", CASES)
def test_matches_oracle(engine, shape, dim, t, rng, request):
    emulator = request.getfixturevalue("emulator") if engine == "aclnn" else None
    x = swi_glu_grad_inputs(rng, shape, dim, t, scale=3.0)["x"]
    calls = emulator.aclemu_calls(b"aclnnSwiGlu") if emulator else 0
    (y,) = run(engine, OP, {"x": x}, {"dim": dim})
    if engine != "ort":  # ORT outputs went through a Cast to float32
        assert np.asarray(y).dtype == t
    ref = swi_glu_oracle(x, dim)
    if ref.size:
        assert_close(y, ref, TOL[t])
    assert np.asarray(y).shape == ref.shape
    if emulator:  # one vendor call, none for an empty x (the vendor refuses it)
        assert emulator.aclemu_calls(b"aclnnSwiGlu") == calls + (x.size > 0)


@pytest.mark.parametrize("t", GLU_TYPES, ids=str)
def test_gives_torch_silu_times_up(t, rng):
    """A merged gate/up projection as transformers' Phi-3 MLP splits it: gate first."""
    x = rng.standard_normal((4, 7, 2 * 96)).astype(t)
    gate, up = torch.from_numpy(x.astype(np.float32)).chunk(2, dim=-1)
    want = (torch.nn.functional.silu(gate) * up).numpy()
    (y,) = run("native", OP, {"x": x})
    assert_close(y, want.astype(np.float64), TOL[t])


def test_extremes_saturate_without_nan(rng):
    x = np.array([[-1e4, -100.0, 0.0, 100.0, 1e4, 2.0, 3.0, 4.0, 5.0, 6.0]], F32)
    (y,) = run("native", OP, {"x": x})
    np.testing.assert_allclose(y, swi_glu_oracle(x), rtol=1e-6, atol=1e-30)


def outputs(rng):
    """Every type, odd lengths and a middle axis, for the ISA comparison."""
    out = []
    for t in GLU_TYPES:
        for shape, dim in [((3, 2 * 1111), -1), ((2, 6, 37), 1)]:
            out += run("native", OP, {"x": (rng.standard_normal(shape) * 4).astype(t)}, {"dim": dim})
    return out


def test_the_plain_loops_give_the_avx2_paths_bits(tmp_path):
    assert_plain_loops_give_avx2_bits(outputs, tmp_path)


REFUSED = [
    ((3, 5), -1, "two equal halves"),
    ((4, 6), 2, "dim"),
    ((4, 6), -3, "dim"),
]


@pytest.mark.parametrize("engine", ["native", "portable"])
@pytest.mark.parametrize("shape, dim, word", REFUSED, ids=["odd", "dim-high", "dim-low"])
def test_refuses_broken_rules(engine, shape, dim, word):
    x = np.ones(shape, BF16)
    with pytest.raises(Exception, match=f"(?s){OP}.*{word}"):
        run(engine, OP, {"x": x}, {"dim": dim}, raw={"y": BF16})
