"""RotaryPositionEmbeddingGrad through the aclnn backend (host emulator): outputs the node leaves
out, and its limits checked before the vendor is called (the oracle tests of every engine are in
test_rotary_position_embedding_grad.py)."""

import numpy as np
import pytest
from aclnn_checks import assert_refused
from test_aclnn_rotary_position_embedding import A2, ASCEND_950, INFERENCE
from test_rotary_position_embedding_grad import SUM_TOL

from engines import run
from oracles import F16, F32, ROPE_LAYOUTS, TOL, assert_close, rope_grad_oracle, rope_inputs

OP = "RotaryPositionEmbeddingGrad"


@pytest.mark.parametrize("taken", [["dx", "dcos"], ["dx", "dsin"], ["dx"]])
def test_outputs_the_node_leaves_out(taken, rng, emulator):
    # With x, aclnn writes both sums; one the node does not take goes to scratch device memory.
    inputs = rope_inputs(rng, ROPE_LAYOUTS[0], F32, "dy", "cos", "sin", "x")
    outputs = run("aclnn", OP, inputs, {"mode": 0}, outputs=taken)
    refs = dict(zip(["dx", "dcos", "dsin"], rope_grad_oracle(**inputs, mode=0), strict=True))
    assert len(outputs) == len(taken)
    for name, out in zip(taken, outputs, strict=True):
        assert_close(out, refs[name], SUM_TOL[F32])


def test_atlas_limits_batch_times_heads_for_the_sums(rng, emulator):
    emulator.aclemu_set_soc(A2)
    layout = ("BNSD-11SD", (40, 26, 2, 8), (1, 1, 2, 8))  # B * N = 1040 > 1024
    inputs = rope_inputs(rng, layout, F32, "dy", "cos", "sin", "x")
    assert_refused(emulator, OP, inputs, {}, "at most 1024 when dcos and dsin are computed")
    dx_only = {name: inputs[name] for name in ("dy", "cos", "sin")}
    (dx,) = run("aclnn", OP, dx_only)
    assert_close(dx, rope_grad_oracle(**dx_only, x=None, mode=0)[0], TOL[F32])


def test_950_takes_four_axes_only(rng, emulator):
    emulator.aclemu_set_soc(ASCEND_950)
    inputs = rope_inputs(rng, ROPE_LAYOUTS[-1], F32, "dy", "cos", "sin", "x")
    assert_refused(emulator, OP, inputs, {}, "takes rank 4")


def test_inference_products_are_refused(rng, emulator):
    emulator.aclemu_set_soc(INFERENCE)
    inputs = rope_inputs(rng, ROPE_LAYOUTS[0], F16, "dy", "cos", "sin")
    assert_refused(emulator, OP, inputs, {}, r"not supported on Atlas inference \(310P\)")


def test_cos_that_does_not_broadcast_is_the_contracts_error(rng, emulator):
    inputs = {
        "dy": rng.standard_normal((2, 3, 4, 8)).astype(F32),
        "cos": np.ones((2, 1, 3, 8), F32),
        "sin": np.ones((2, 1, 3, 8), F32),
    }
    assert_refused(emulator, OP, inputs, {}, "broadcast to it unchanged", raw_outputs={"dx": F32})
