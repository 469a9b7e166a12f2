"""FlashAttentionScore against the float64 oracle on every engine over dtypes, layouts, sparse
modes, masks, bands, GQA groups, Dv != D, several tiles and ragged TND batches; the native
kernel's bits on any thread count and ISA path, and its errors."""

import numpy as np
import onnxruntime as ort
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

from cases.flash_attention_score import check_stats
from engines import ENGINES, on, run
from harness import assert_capped_isa_matches_oracle, assert_plain_loops_give_avx2_bits, bits, raw_model
from oracles import (
    BF16,
    F16,
    F32,
    FA_LAYOUTS,
    TOL,
    assert_close,
    flash_attention_inputs,
    flash_attention_oracle,
)
from ort_ascend_ops.runtime import session_options

OUTPUTS = {"attention_out": F32, "softmax_max": F32, "softmax_sum": F32}
# More than one tile each way: 130 query rows are 3 blocks of 64, 300 keys 2 blocks of 256.
LONG = {"s1": 130, "s2": 300, "lengths_q": (0, 130, 200), "lengths_kv": (100, 100, 400)}

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
    # Ragged batches: one without query rows, one without keys (its rows see nothing).
    ("TND-ragged", "TND", F32, {"lengths_q": (0, 3, 9, 12), "lengths_kv": (4, 4, 10, 10)}),
    ("TND-ragged-mode3", "TND", F16, {"lengths_q": (2, 2, 9), "lengths_kv": (0, 5, 8), "sparse_mode": 3}),
    *((f"TND-lengths-{np.dtype(lt).name}", "TND", F32, {"lengths_dtype": lt}) for lt in (np.int32, np.int64)),
    # A band that keeps no key: every row fully masked.
    ("BSND-band-empty", "BSND", F32, {"mask": "2d", "pre_tokens": -1, "next_tokens": -1}),
    ("BSND-empty-batch", "BSND", F32, {"batch": 0}),
    ("BNSD-no-keys", "BNSD", F32, {"s2": 0}),
]


def check(engine, inputs, attrs, t):
    outputs = run(engine, "FlashAttentionScore", inputs, attrs)
    out, row_max, row_sum = (np.asarray(o) for o in outputs)
    ref_out, ref_max, ref_sum = flash_attention_oracle(**inputs, **attrs)
    if engine != "ort":  # ORT outputs went through a Cast to float32
        assert out.dtype == t
    assert_close(out, ref_out, TOL[t]) if np.any(ref_out) else np.testing.assert_array_equal(out, 0)
    check_stats(row_max, ref_max)
    check_stats(row_sum, ref_sum)
    # A row without keys: out exactly 0, never NaN.
    assert np.isfinite(out.astype(np.float32)).all()
    return out, row_max, row_sum


@pytest.mark.parametrize(
    "engine, layout, t, sizes",
    [on(e, lay, t, sizes, id=name) for e in ("native", *ENGINES) for name, lay, t, sizes in CASES],
)
def test_matches_oracle(engine, layout, t, sizes, rng):
    inputs, attrs = flash_attention_inputs(rng, layout, t, **sizes)
    check(engine, inputs, attrs, t)


def test_fully_masked_rows_give_zero_and_minus_infinity(rng):
    inputs, attrs = flash_attention_inputs(rng, "BSND", F32, mask="bn", s1=6, s2=5)
    inputs["atten_mask"][0, 1, 2] = True  # batch 0, head 1, row 2: every key masked
    out, row_max, row_sum = check("native", inputs, attrs, F32)
    np.testing.assert_array_equal(out[0, 2, 1], 0)
    assert np.all(row_max[0, 1, 2] == -np.inf) and np.all(row_sum[0, 1, 2] == 0)


def threaded_case(rng, t):
    return flash_attention_inputs(
        rng, "BSND", t, batch=1, n1=4, n2=2, s1=200, s2=300, d=16, mask="bn", pre_tokens=150, next_tokens=90
    )


@pytest.mark.parametrize("t", [F32, BF16], ids=lambda t: t.name)
def test_bit_identical_for_any_thread_count(t, rng):
    inputs, attrs = threaded_case(rng, t)
    runs = [run("native", "FlashAttentionScore", inputs, attrs, threads=n) for n in (1, 2, 3)]
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
        inputs, attrs = flash_attention_inputs(rng, layout, t, **sizes)
        outputs += run("native", "FlashAttentionScore", inputs, attrs)
    return outputs


def test_the_plain_loops_give_the_avx2_paths_bits(tmp_path):
    assert_plain_loops_give_avx2_bits(isa_outputs, tmp_path, best=False)


@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_capped_isa_matches_oracle(isa):
    """bfloat16's S and P V from float32 copies (no AVX-512 BF16)."""
    assert_capped_isa_matches_oracle("flash_attention", isa)


def _bsnd(rng, **sizes):
    return flash_attention_inputs(rng, "BSND", F32, **sizes)


def _tnd(rng, **sizes):
    return flash_attention_inputs(rng, "TND", F32, **sizes)


def _bsh(rng, **sizes):
    return flash_attention_inputs(rng, "BSH", F32, **sizes)


def _with(make, change=None, **attrs):
    """A call from make(rng), its inputs changed by change(inputs) and attributes updated."""

    def call(rng):
        inputs, base = make(rng)
        return (change(inputs) if change else inputs), base | attrs

    return call


def _axis(name, axis, keep):
    """inputs with `name` cut to its first `keep` entries along `axis`."""
    return lambda i: i | {name: np.take(i[name], range(keep), axis=axis)}


def _grow(name, axis):
    """inputs with `name` one entry longer along `axis` (its first one repeated)."""
    return lambda i: i | {name: np.concatenate([i[name], np.take(i[name], [0], axis=axis)], axis=axis)}


_Q = "actual_seq_lengths_query"
_KV = "actual_seq_lengths_kv"

# (id, call maker, words the error must hold besides the op's name)
REFUSED = [
    ("layout", _with(_bsnd, input_layout="BHSD"), ["attribute 'input_layout'", "'BSND'"]),
    ("sparse_mode", _with(_bsnd, sparse_mode=1), ["attribute 'sparse_mode' is 1", "0, 2 or 3"]),
    ("keep_prob", _with(_bsnd, keep_prob=0.9), ["attribute 'keep_prob'", "must be 1"]),
    ("head_num 0", _with(_bsnd, head_num=0), ["attribute 'head_num' is 0", ">= 1"]),
    ("head_num mismatch", _with(_bsnd, head_num=3), ["attribute 'head_num' is 3", "N1 = 4"]),
    ("query rank", _with(_bsnd, lambda i: i | {"query": i["query"][0]}), ["'query'", "rank 4"]),
    ("value rank", _with(_tnd, lambda i: i | {"value": i["value"][None]}), ["'value'", "rank 3"]),
    ("N2 divides N1", _with(_bsnd, _grow("key", 2)), ["'key'", "N2 = 3", "divide N1 = 4"]),
    ("value heads", _with(_bsnd, _axis("value", 2, 1)), ["'value'", "same heads N2"]),
    ("head dim", _with(_bsnd, _axis("key", 3, 4)), ["'key'", "head dim D"]),
    ("D 0", _with(_bsnd, lambda i: i | {n: i[n][..., :0] for n in ("query", "key")}), ["'query'", "D >= 1"]),
    ("Dv 0", _with(_bsnd, _axis("value", 3, 0)), ["'value'", "Dv >= 1"]),
    ("batch", _with(_bsnd, _axis("key", 0, 1)), ["'key'", "batch B"]),
    ("S2", _with(_bsnd, _axis("value", 1, 3)), ["'value'", "share S2"]),
    ("T2", _with(_tnd, _axis("value", 0, 3)), ["'value'", "share T2"]),
    ("BSH H1", _with(_bsh, head_num=3), ["'query'", "H1 = 32", "multiple of head_num = 3"]),
    ("BSH H2", _with(_bsh, _axis("key", 2, 12)), ["'key'", "H2 = 12", "N2 * D"]),
    ("BSH Hv", _with(_bsh, _axis("value", 2, 15)), ["'value'", "Hv = 15", "multiple of N2 = 2"]),
    (
        "mask shape",
        _with(lambda r: _bsnd(r, mask="2d"), _axis("atten_mask", 1, 3)),
        ["'atten_mask'", "[S1, S2]"],
    ),
    (
        "mask bn heads",
        _with(lambda r: _bsnd(r, mask="bn"), _axis("atten_mask", 1, 2)),
        ["'atten_mask'", "[B, N1"],
    ),
    (
        "mask mode 2",
        _with(lambda r: _bsnd(r, mask="2d"), sparse_mode=2),
        ["'atten_mask'", "only with sparse_mode 0"],
    ),
    (
        "mask mode 3",
        _with(lambda r: _bsnd(r, mask="b1"), sparse_mode=3),
        ["'atten_mask'", "only with sparse_mode 0"],
    ),
    (
        "mask type",
        _with(lambda r: _bsnd(r, mask="2d", mask_dtype=np.float32)),
        ["'atten_mask'", "bool or uint8"],
    ),
    (
        "mask in TND",
        _with(_tnd, lambda i: i | {"atten_mask": np.zeros((7, 9), np.bool_)}),
        ["TND takes no input 'atten_mask'"],
    ),
    ("lengths in BSND", _with(_bsnd, lambda i: i | {_Q: np.array([5, 10])}), ["BSND takes no input", _Q]),
    ("TND without kv lengths", _with(_tnd, lambda i: {**i, _KV: None}), ["TND needs input", _KV]),
    ("TND without lengths", _with(_tnd, lambda i: {**i, _Q: None, _KV: None}), ["TND needs input", _Q]),
    ("decreasing", _with(_tnd, lambda i: i | {_Q: np.array([7, 3])}), [_Q, "non-decreasing from 0"]),
    ("negative", _with(_tnd, lambda i: i | {_KV: np.array([-1, 9])}), [_KV, "non-decreasing from 0"]),
    ("short", _with(_tnd, lambda i: i | {_KV: np.array([4, 8])}), [_KV, "ends at 8", "9 rows"]),
    ("rank 2", _with(_tnd, lambda i: i | {_Q: i[_Q][None]}), [_Q, "1-D with one value per batch"]),
    ("float lengths", _with(_tnd, lambda i: i | {_Q: i[_Q].astype(np.float32)}), [_Q, "int64 or int32"]),
    ("batch counts", _with(_tnd, lambda i: i | {_KV: np.array([2, 4, 9])}), [_Q, _KV, "one value per batch"]),
]


@pytest.mark.parametrize("make, words", [pytest.param(m, w, id=name) for name, m, w in REFUSED])
def test_refusals_name_op_input_and_rule(make, words, rng):
    inputs, attrs = make(rng)
    order = ["query", "key", "value", "atten_mask", _Q, _KV]
    present = [n for n in order if inputs.get(n) is not None]
    feeds = {n: inputs.get(n) for n in order[: order.index(present[-1]) + 1]}
    attrs = {k: v for k, v in attrs.items() if v is not None}
    model = raw_model("FlashAttentionScore", feeds, OUTPUTS, attrs, with_functions=False)
    # A plain session: make_session's own checks would refuse a mask or lengths of other types
    # before the kernel does.
    session = ort.InferenceSession(
        model.SerializeToString(), session_options(), providers=["CPUExecutionProvider"]
    )
    with pytest.raises(InvalidArgument) as error:  # an empty slot (None) takes no feed
        session.run(None, {n: a for n, a in feeds.items() if a is not None})
    message = str(error.value)
    assert "FlashAttentionScore: " in message, message
    for word in words:
        assert word in message, message
