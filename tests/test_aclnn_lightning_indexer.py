"""LightningIndexer through the aclnn backend (host emulator): the aclnn page's limits checked
before the vendor is called (the oracle test of every engine is in test_lightning_indexer.py)."""

import pytest
from aclnn_checks import assert_refused

from engines import run
from lightning_indexer_checks import aclnn_inputs, forward_inputs
from oracles import F16, F32

OP = "LightningIndexer"


@pytest.mark.parametrize(
    ("soc", "heads", "rule"),
    [
        (b"Ascend910B3", 65, "1 to 64 query heads"),
        (b"Ascend950DT_9582", 12, "8, 16, 24, 32 or 64 query heads"),
    ],
    ids=["A2", "950"],
)
def test_head_limits(soc, heads, rule, rng, emulator):
    emulator.aclemu_set_soc(soc)
    inputs = forward_inputs(aclnn_inputs(rng, "BSND", 3, F16, n1=heads))
    assert_refused(emulator, OP, inputs, {"sparse_count": 4}, rule)


@pytest.mark.parametrize("sparse_count", [2049, 3000, 9216])
def test_sparse_count_limits(sparse_count, rng, emulator):
    inputs = forward_inputs(aclnn_inputs(rng, "BSND", 3, F16))
    assert_refused(emulator, OP, inputs, {"sparse_count": sparse_count}, "takes 1 to 2048, 3072")


def test_float32_and_head_dim_are_refused(rng, emulator):
    inputs = forward_inputs(aclnn_inputs(rng, "BSND", 3, F32))
    assert_refused(emulator, OP, inputs, {"sparse_count": 4}, "not float32")
    inputs = forward_inputs(aclnn_inputs(rng, "BSND", 3, F16, d=64))
    assert_refused(emulator, OP, inputs, {"sparse_count": 4}, "head dim D = 128")


def test_no_tokens_calls_nothing(rng, emulator):
    inputs = forward_inputs(aclnn_inputs(rng, "BSND", 3, F16, s1=0))
    indices, values = run("aclnn", OP, inputs, {"sparse_count": 4})
    assert indices.shape == values.shape == (2, 0, 4)
    assert emulator.aclemu_calls(b"aclnnLightningIndexerGetWorkspaceSize") == 0
