"""LightningIndexer against the float64 oracle (selection and values) on every engine over
layouts, sparse modes and dtypes, ties and edges; the native kernel's blocks and its errors."""

import numpy as np
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

from engines import ENGINES, on, run
from harness import assert_capped_isa_matches_oracle, bits
from lightning_indexer_checks import EDGES, MODES, aclnn_inputs, check_forward, forward_inputs
from oracles import BF16, F16, F32, lightning_indexer_grad_inputs


@pytest.mark.parametrize(
    "engine, layout, mode, t",
    [
        *(on("native", lay, m, t, id=f"{t.name}-{lay}-{m}") for t in (F32, F16, BF16) for lay, m in MODES),
        # aclnnLightningIndexer takes float16 and bfloat16 at the vendor's sizes.
        *(on("aclnn", lay, m, t, id=f"{lay}-{m}-{t.name}") for lay, m in MODES for t in (F16, BF16)),
        *(
            on(engine, lay, m, t, id=f"{t.name}-{lay}-{m}")
            for engine in ENGINES
            for t in (F32, F16, BF16)
            for lay, m in MODES
        ),
    ],
)
def test_matches_oracle(engine, layout, mode, t, rng, request):
    if engine == "aclnn":
        emulator = request.getfixturevalue("emulator")
        inputs, count = forward_inputs(aclnn_inputs(rng, layout, mode, t)), 6
    else:
        inputs, count = forward_inputs(lightning_indexer_grad_inputs(rng, layout, mode, t, np.int32)), 4
    check_forward(engine, inputs, {"layout": layout, "sparse_mode": mode, "sparse_count": count}, t)
    if engine == "aclnn":
        assert emulator.aclemu_calls(b"aclnnLightningIndexer") == 1


@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_capped_isa_matches_oracle(isa):
    """bfloat16's scores from float32 copies (no AVX-512 BF16)."""
    assert_capped_isa_matches_oracle("lightning_indexer", isa)


@pytest.mark.parametrize("engine", ["native", *(on(e) for e in ENGINES)])
@pytest.mark.parametrize("layout, mode, sizes", EDGES)
def test_edges(engine, layout, mode, sizes, rng):
    inputs = forward_inputs(lightning_indexer_grad_inputs(rng, layout, mode, F32, np.int32, **sizes))
    attrs = {"layout": layout, "sparse_mode": mode, "sparse_count": sizes.get("k", 4)}
    check_forward(engine, inputs, attrs, F32)


@pytest.mark.parametrize("engine", ["native", *(on(e) for e in ENGINES)])
@pytest.mark.parametrize("layout", ["BSND", "TND"])
def test_ties_go_to_the_lower_key(engine, layout):
    # Small integers make every score exact, whatever the order of the sums, so equal scores are
    # exactly equal in float32 and float64 alike; there are many of them, zeros from the ReLU too.
    # The same draw on every engine (15 ties in TND, 52 in BSND).
    rng = np.random.default_rng(2)
    inputs = forward_inputs(lightning_indexer_grad_inputs(rng, layout, 0, F32, np.int32))
    for name in ("query", "key", "weights"):
        inputs[name] = rng.integers(-1, 2, inputs[name].shape).astype(np.float32)
    attrs = {"layout": layout, "sparse_mode": 0, "sparse_count": 9}
    indices, values = (np.asarray(a).reshape(-1, 9) for a in check_forward(engine, inputs, attrs, F32))
    tied = (values[:, 1:] == values[:, :-1]) & (indices[:, 1:] != -1)
    assert tied.sum() >= 10, tied.sum()
    assert np.all(indices[:, 1:][tied] > indices[:, :-1][tied])


@pytest.mark.parametrize("lengths_type", [np.int32, np.int64], ids=lambda p: np.dtype(p).name)
@pytest.mark.parametrize("engine", ["native", *(on(e) for e in ENGINES)])
def test_tnd_lengths_of_either_integer_type(engine, lengths_type, rng):
    inputs = lightning_indexer_grad_inputs(rng, "TND", 3, F32, np.int32, lengths_dtype=lengths_type)
    check_forward(engine, forward_inputs(inputs), {"layout": "TND", "sparse_mode": 3, "sparse_count": 4}, F32)


@pytest.mark.parametrize("layout, mode", [("BSND", 3), ("TND", 0), ("TND", 3)])
def test_keys_in_blocks_and_a_streaming_top_k(layout, mode, rng):
    # 256 heads: the kernel scores 512 keys at a time for a tile of 2 tokens, so 700 keys take
    # two blocks (the last one partial, and past some tokens' causal limit), and keeping 300
    # of them overflows the 2 x K candidates kept per token. Integers: many ties, all exact.
    sizes = {"s1": 6, "s2": 700, "lengths_q": (3, 9), "lengths_k": (650, 1300), "n1": 256, "d": 4}
    inputs = forward_inputs(lightning_indexer_grad_inputs(rng, layout, mode, F32, np.int32, **sizes))
    for name in ("query", "key", "weights"):
        inputs[name] = rng.integers(-3, 4, inputs[name].shape).astype(np.float32)
    attrs = {"layout": layout, "sparse_mode": mode, "sparse_count": 300}
    check_forward("native", inputs, attrs, F32)
    runs = [run("native", "LightningIndexer", inputs, attrs, threads=n) for n in (1, 2, 4)]
    assert all([bits(a) for a in run] == [bits(a) for a in runs[0]] for run in runs[1:])


def test_bit_identical_for_any_thread_count(rng):
    inputs = forward_inputs(
        lightning_indexer_grad_inputs(rng, "BSND", 3, F32, np.int32, batch=1, s1=40, s2=200, n1=4, d=16)
    )
    attrs = {"layout": "BSND", "sparse_mode": 3, "sparse_count": 16}
    runs = [run("native", "LightningIndexer", inputs, attrs, threads=n) for n in (1, 2, 3)]
    assert [bits(a) for a in runs[1]] == [bits(a) for a in runs[0]] == [bits(a) for a in runs[2]]


@pytest.mark.parametrize(
    "attrs, rule",
    [
        ({"sparse_count": 0}, "attribute 'sparse_count' is 0"),
        ({"layout": "SBND"}, "attribute 'layout'"),
        ({"sparse_mode": 2}, "attribute 'sparse_mode' is 2"),
    ],
    ids=["sparse_count 0", "layout", "sparse mode"],
)
def test_bad_input_is_an_ort_error_naming_op_and_rule(attrs, rule):
    inputs = {
        "query": np.ones((1, 2, 2, 4), np.float32),
        "key": np.ones((1, 5, 1, 4), np.float32),
        "weights": np.ones((1, 2, 2), np.float32),
    }
    with pytest.raises(InvalidArgument) as error:
        run(
            "native",
            "LightningIndexer",
            inputs,
            {"layout": "BSND", "sparse_mode": 3, "sparse_count": 2} | attrs,
            raw={"sparse_indices": np.int32, "sparse_values": np.float32},
        )
    assert "LightningIndexer" in str(error.value) and rule in str(error.value)
