"""LightningIndexerGrad through the aclnn backend (host emulator) against the float64 oracle, and
the aclnn page's and operator definition's limits checked before the vendor is called: float16 or
bfloat16, int32 indices and lengths, D = 128, 1 to 64 heads, top-k up to 2048 and no larger than
S2, and no index the vendor kernel would read out of bounds."""

import numpy as np
import pytest
from aclnn_checks import assert_refused, host_waits

from engines import run
from lightning_indexer_checks import MODES, aclnn_inputs
from oracles import (
    BF16,
    F16,
    F32,
    TOL,
    assert_close,
    lightning_indexer_grad_oracle,
)

OP = "LightningIndexerGrad"


def attrs_of(inputs, layout, mode):
    return {"head_num": inputs["query"].shape[-2], "layout": layout, "sparse_mode": mode}


def test_the_vendors_limits_at_their_edges(rng, emulator):
    inputs = aclnn_inputs(rng, "BSND", 0, F16, n1=64, k=9, batch=1, s1=2, s2=9)
    outputs = run("aclnn", OP, inputs, attrs_of(inputs, "BSND", 0))
    for out, ref in zip(
        outputs, lightning_indexer_grad_oracle(**inputs, layout="BSND", sparse_mode=0), strict=True
    ):
        assert_close(out, ref, TOL[F16])


@pytest.mark.parametrize(
    ("sizes", "rule"),
    [
        ({"d": 64}, "needs head dim D = 128"),
        ({"n1": 65}, "1 to 64 query heads"),
        ({"k": 10}, "10 <= S2"),
    ],
    ids=["head-dim", "heads", "top-k-past-S2"],
)
def test_limits_are_refused(sizes, rule, rng, emulator):
    inputs = aclnn_inputs(rng, "BSND", 0, F16, **sizes)
    assert_refused(emulator, OP, inputs, attrs_of(inputs, "BSND", 0), rule)


def test_float32_is_refused(rng, emulator):
    inputs = aclnn_inputs(rng, "BSND", 3, F32)
    assert_refused(
        emulator, OP, inputs, attrs_of(inputs, "BSND", 3), "float16 or bfloat16 inputs, not float32"
    )


def test_int64_indices_are_refused(rng, emulator):
    inputs = aclnn_inputs(rng, "BSND", 3, F16)
    inputs["sparse_indices"] = inputs["sparse_indices"].astype(np.int64)
    assert_refused(emulator, OP, inputs, attrs_of(inputs, "BSND", 3), "'sparse_indices' must be int32")


def test_int64_lengths_are_refused(rng, emulator):
    inputs = aclnn_inputs(rng, "TND", 3, F16)
    inputs["actual_seq_lengths_query"] = inputs["actual_seq_lengths_query"].astype(np.int64)
    assert_refused(
        emulator, OP, inputs, attrs_of(inputs, "TND", 3), "'actual_seq_lengths_query' must be int32"
    )


@pytest.mark.parametrize(("layout", "mode"), MODES)
@pytest.mark.parametrize("bad", [-2, 9, 2**31 - 1, -(2**31)])
def test_hostile_index_is_refused_before_the_device_reads_it(layout, mode, bad, rng, emulator):
    inputs = aclnn_inputs(rng, layout, mode, F16)
    first_counted = np.flatnonzero(inputs["sparse_indices"].reshape(-1) != -1)[0]
    inputs["sparse_indices"].reshape(-1)[first_counted] = bad
    assert_refused(emulator, OP, inputs, attrs_of(inputs, layout, mode), "it must be -1 or inside")


def test_skipped_slot_is_refused_because_the_vendor_reads_it(rng, emulator):
    inputs = aclnn_inputs(rng, "BSND", 0, F16)
    inputs["sparse_indices"][0, 0, 1] = -1
    assert_refused(emulator, OP, inputs, attrs_of(inputs, "BSND", 0), "cannot skip it")


def test_tnd_lengths_are_checked_on_the_host(rng, emulator):
    inputs = aclnn_inputs(rng, "TND", 0, F16)
    inputs["actual_seq_lengths_key"] = np.array([9, 4], np.int32)
    assert_refused(emulator, OP, inputs, attrs_of(inputs, "TND", 0), "cumulative ends")


def test_index_checks_wait_for_the_stream_once_per_read(rng, emulator):
    inputs = aclnn_inputs(rng, "TND", 3, BF16)
    run("aclnn", OP, inputs, attrs_of(inputs, "TND", 3))
    assert host_waits(emulator) == 3  # two lengths, one index tensor


def test_inference_products_are_refused(rng, emulator):
    emulator.aclemu_set_soc(b"Ascend310P3")
    inputs = aclnn_inputs(rng, "BSND", 3, F16)
    assert_refused(emulator, OP, inputs, attrs_of(inputs, "BSND", 3), "not supported on Atlas inference")


def test_contract_errors_come_first(rng, emulator):
    inputs = aclnn_inputs(rng, "BSND", 3, F16)
    with pytest.raises(Exception, match="attribute 'head_num' is 3 but query has N1 = 4"):
        run(
            "aclnn",
            OP,
            inputs,
            attrs_of(inputs, "BSND", 3) | {"head_num": 3},
            raw={"d_query": F16, "d_key": F16, "d_weights": F16},
        )
    assert emulator.aclemu_calls(b"aclnnLightningIndexerGradGetWorkspaceSize") == 0
