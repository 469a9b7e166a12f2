"""FlashAttentionScoreGrad against the float64 oracle on every engine over dtypes, layouts, sparse
modes, masks, bands, GQA groups, Dv != D, several tiles and ragged TND batches; the native
kernel's bits on any thread count and ISA path, and its grad-only errors."""

import numpy as np
import onnxruntime as ort
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

from cases.flash_attention_score_grad import magnitude
from engines import ENGINES, on, run
from fuzzing import close
from harness import assert_capped_isa_matches_oracle, assert_plain_loops_give_avx2_bits, bits, raw_model
from oracles import (
    BF16,
    F16,
    F32,
    FA_LAYOUTS,
    TOL,
    flash_attention_grad_oracle,
    flash_attention_inputs,
)
from ort_ascend_ops.runtime import session_options

OP = "FlashAttentionScoreGrad"
# More than one tile each way: 130 query rows are 3 blocks of 64, 300 keys 2 blocks of 256.
LONG = {"s1": 130, "s2": 300, "lengths_q": (0, 130, 200), "lengths_kv": (100, 100, 400)}
# Several key splits, each with its own dq partials: 1300 keys are 3 blocks of 512 (head dims up to
# 64) or 6 of 256 (wider); the band leaves the first query rows out of the later splits.
SPLITS = {"batch": 1, "n1": 2, "n2": 1, "s1": 140, "s2": 1300}

# (id, layout, dtype, keyword arguments of flash_attention_inputs)
CASES = [
    *((f"{t.name}-{lay}", lay, t, {}) for t in (F32, F16, BF16) for lay in FA_LAYOUTS),
    *(
        (f"{t.name}-{lay}-mode{m}", lay, t, {"sparse_mode": m})
        for m in (2, 3)
        for lay in FA_LAYOUTS
        for t in ((F32, BF16) if lay == "BNSD" else (F32,))
    ),
    *(
        (f"{lay}-mask-{kind}-{np.dtype(md).name}", lay, F32, {"mask": kind, "mask_dtype": md})
        for lay in ("BSND", "SBH")
        for kind in ("2d", "b1", "bn")
        for md in (np.bool_, np.uint8)
    ),
    ("f16-BNSD-mask-bn-band", "BNSD", F16, {"mask": "bn", "pre_tokens": 2, "next_tokens": 1}),
    ("BSH-mask-2d-band", "BSH", F32, {"mask": "2d", "pre_tokens": 0, "next_tokens": 3, "s1": 9}),
    ("BSND-mha", "BSND", F32, {"n1": 3, "n2": 3}),
    ("BNSD-mqa", "BNSD", BF16, {"n1": 4, "n2": 1}),
    ("BSH-mqa-mode2", "BSH", F32, {"n1": 4, "n2": 1, "sparse_mode": 2}),
    ("BSND-dv", "BSND", F32, {"dv": 5}),
    ("SBH-dv", "SBH", F16, {"dv": 12, "n2": 1}),
    ("TND-dv", "TND", BF16, {"dv": 16, "sparse_mode": 3}),
    *((f"BSND-s1>s2-mode{m}", "BSND", F32, {"s1": 9, "s2": 4, "sparse_mode": m}) for m in (0, 2, 3)),
    *((f"BNSD-s1<s2-mode{m}", "BNSD", F32, {"s1": 3, "s2": 11, "sparse_mode": m}) for m in (2, 3)),
    *(
        (f"{t.name}-{lay}-long-mode{m}", lay, t, LONG | {"sparse_mode": m})
        for lay, t, m in [
            ("BSND", F32, 0),
            ("BNSD", F32, 2),
            ("SBH", BF16, 3),
            ("TND", F32, 3),
            ("TND", F16, 2),
        ]
    ),  # fmt: skip
    ("BSND-long-mask-band", "BSND", F32, LONG | {"mask": "b1", "pre_tokens": 70, "next_tokens": 140}),
    ("BSND-splits-mode3", "BSND", F32, SPLITS | {"sparse_mode": 3}),
    ("BNSD-splits-band", "BNSD", BF16, SPLITS | {"mask": "2d", "pre_tokens": 40, "next_tokens": 600}),
    ("BSH-splits-wide", "BSH", F32, SPLITS | {"d": 72, "dv": 16}),
    # Ragged batches: one without query rows, one without keys (its rows see nothing).
    ("TND-ragged", "TND", F32, {"lengths_q": (0, 3, 9, 12), "lengths_kv": (4, 4, 10, 10)}),
    ("TND-ragged-mode3", "TND", F16, {"lengths_q": (2, 2, 9), "lengths_kv": (0, 5, 8), "sparse_mode": 3}),
    *((f"TND-lengths-{np.dtype(lt).name}", "TND", F32, {"lengths_dtype": lt}) for lt in (np.int32, np.int64)),
    # A band that keeps no key: every row fully masked, every gradient 0.
    ("BSND-band-empty", "BSND", F32, {"mask": "2d", "pre_tokens": -1, "next_tokens": -1}),
    ("BSND-empty-batch", "BSND", F32, {"batch": 0}),
    ("BNSD-no-keys", "BNSD", F32, {"s2": 0}),
]


def check(engine, inputs, attrs, t):
    outputs = [np.asarray(o) for o in run(engine, OP, inputs, attrs)]
    refs = flash_attention_grad_oracle(**inputs, **attrs)
    floor = magnitude(inputs, attrs)
    for out, ref in zip(outputs, refs, strict=True):
        if engine != "ort":  # ORT outputs went through a Cast to float32
            assert out.dtype == t
        close(out, ref, TOL[t], scale=np.abs(ref) + floor)
        assert np.isfinite(out.astype(np.float32)).all()
    return outputs


@pytest.mark.parametrize(
    "engine, layout, t, sizes",
    [on(e, lay, t, sizes, id=name) for e in ("native", *ENGINES) for name, lay, t, sizes in CASES],
)
def test_matches_oracle(engine, layout, t, sizes, rng):
    inputs, attrs = flash_attention_inputs(rng, layout, t, grad=True, **sizes)
    check(engine, inputs, attrs, t)


def test_fully_masked_rows_give_zero_gradients(rng):
    inputs, attrs = flash_attention_inputs(rng, "BSND", F32, mask="bn", s1=6, s2=5, grad=True)
    inputs["atten_mask"][0, 1, 2] = True  # batch 0, head 1, row 2: every key masked
    inputs["softmax_max"][0, 1, 2] = -np.inf
    inputs["softmax_sum"][0, 1, 2] = 0
    dq, _, _ = check("native", inputs, attrs, F32)
    np.testing.assert_array_equal(dq[0, 2, 1], 0)
    # Every row of every batch masked: all three gradients exactly 0.
    inputs, attrs = flash_attention_inputs(
        rng, "BSND", F32, mask="2d", pre_tokens=-1, next_tokens=-1, grad=True
    )
    for out in check("native", inputs, attrs, F32):
        np.testing.assert_array_equal(out, 0)


def threaded_case(rng, t):
    return flash_attention_inputs(
        rng,
        "BSND",
        t,
        batch=1,
        n1=4,
        n2=2,
        s1=200,
        s2=300,
        d=16,
        mask="bn",
        pre_tokens=150,
        next_tokens=90,
        grad=True,
    )


def splits_case(rng, t):
    """Several key splits over two key/value heads (their dq partials added in a fixed order)."""
    return flash_attention_inputs(
        rng, "BNSD", t, **SPLITS | {"n1": 4, "n2": 2, "s1": 200}, sparse_mode=3, grad=True
    )


@pytest.mark.parametrize("case", [threaded_case, splits_case], ids=["band", "splits"])
@pytest.mark.parametrize("t", [F32, BF16], ids=lambda t: t.name)
def test_bit_identical_for_any_thread_count(t, case, rng):
    inputs, attrs = case(rng, t)
    runs = [run("native", OP, inputs, attrs, threads=n) for n in (1, 2, 3)]
    assert [bits(a) for a in runs[1]] == [bits(a) for a in runs[0]] == [bits(a) for a in runs[2]]


_ISA_CASES = [
    ("BSND", F32, {"s1": 70, "s2": 141, "mask": "bn", "pre_tokens": 40, "next_tokens": 30}),
    ("TND", F16, {"lengths_q": (5, 75), "lengths_kv": (130, 141), "sparse_mode": 3, "dv": 13}),
    ("SBH", BF16, {"s1": 67, "s2": 133, "sparse_mode": 2, "n2": 1}),
]


def isa_outputs(rng):
    """The ISA comparison's calls: every dtype."""
    outputs = []
    for layout, t, sizes in _ISA_CASES:
        inputs, attrs = flash_attention_inputs(rng, layout, t, grad=True, **sizes)
        outputs += run("native", OP, inputs, attrs)
    return outputs


def test_the_plain_loops_give_the_avx2_paths_bits(tmp_path):
    assert_plain_loops_give_avx2_bits(isa_outputs, tmp_path, best=False)


@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_capped_isa_matches_oracle(isa):
    """bfloat16's S and dP from float32 copies (no AVX-512 BF16)."""
    assert_capped_isa_matches_oracle("flash_attention_grad", isa)


def _cut(name, axis, keep):
    """inputs with `name` cut to its first `keep` entries along `axis`."""
    return lambda i: i | {name: np.take(i[name], range(keep), axis=axis)}


_ORDER = [
    "query",
    "key",
    "value",
    "dy",
    "atten_mask",
    "softmax_max",
    "softmax_sum",
    "attention_in",
    "actual_seq_lengths_query",
    "actual_seq_lengths_kv",
]
_OUTPUTS = {"dq": F32, "dk": F32, "dv": F32}

# (id, layout, change of the inputs, words the error must hold besides the op's name); the rules
# both ops share are tested with the forward.
REFUSED = [
    ("dy rows", "BSND", _cut("dy", 1, 3), ["input 'dy'", "attention_out's shape"]),
    ("dy head dim", "TND", _cut("dy", 2, 3), ["input 'dy'", "attention_out's shape"]),
    ("attention_in", "BSH", _cut("attention_in", 2, 8), ["input 'attention_in'", "attention_out's shape"]),
    ("softmax_max", "BSND", _cut("softmax_max", 3, 1), ["input 'softmax_max'", "[B, N1, S1, 8]"]),
    ("softmax_sum", "BNSD", _cut("softmax_sum", 2, 2), ["input 'softmax_sum'", "[B, N1, S1, 8]"]),
    ("TND stats", "TND", _cut("softmax_max", 2, 4), ["input 'softmax_max'", "[T1, N1, 8]"]),
]


@pytest.mark.parametrize("layout, change, words", [pytest.param(*r[1:], id=r[0]) for r in REFUSED])
def test_refusals_name_op_input_and_rule(layout, change, words, rng):
    inputs, attrs = flash_attention_inputs(rng, layout, F32, grad=True)
    inputs = change(inputs)
    present = [n for n in _ORDER if inputs.get(n) is not None]
    feeds = {n: inputs.get(n) for n in _ORDER[: _ORDER.index(present[-1]) + 1]}
    attrs = {k: v for k, v in attrs.items() if v is not None}
    model = raw_model(OP, feeds, _OUTPUTS, attrs, with_functions=False)
    session = ort.InferenceSession(
        model.SerializeToString(), session_options(), providers=["CPUExecutionProvider"]
    )
    with pytest.raises(InvalidArgument) as error:  # an empty slot (None) takes no feed
        session.run(None, {n: a for n, a in feeds.items() if a is not None})
    message = str(error.value)
    assert f"{OP}: " in message, message
    for word in words:
        assert word in message, message
