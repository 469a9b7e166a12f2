"""RmsNormGrad against the float64 oracle on every engine (the kernels and the reference
functions), the native kernel against the inlined reference and finite differences of the
forward, and the contract's error rules."""

import numpy as np
import pytest
from aclnn_checks import host_waits
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

from engines import ENGINES, on, run
from harness import assert_capped_isa_matches_oracle, assert_plain_loops_give_avx2_bits, bits
from oracles import (
    BF16,
    F16,
    F32,
    PAIRS,
    SHAPES,
    TOL,
    assert_close,
    pair_id,
    rms_norm_grad_inputs,
    rms_norm_grad_oracle,
)

NATIVE_SHAPES = SHAPES + [
    ((5, 7, 333), (333,)),  # a row length that is no multiple of the vector width
    ((300, 1024), (1024,)),  # more rows than blocks
    ((1, 1, 3), (3,)),
]
# q/k norms (Gemma 3, Qwen 3, OLMo 2): rows of one head's dimension, [B, S, N, head_dim], many
# rows per gamma, so dgamma sums thousands of rows.
QK_NORM_SHAPES = [((2, 64, 8, 256), (256,)), ((4, 128, 16, 64), (64,))]
CASES = [  # (engine, shapes, pair)
    *(on("native", s, p, id=f"{s}-{pair_id(p)}") for s in NATIVE_SHAPES for p in PAIRS),
    *(
        on(engine, s, p, id=f"{s}-{pair_id(p)}")
        for engine in ["aclnn", *ENGINES]
        for s in SHAPES
        for p in PAIRS
    ),
    *(
        on(engine, s, p, id=f"{s}-{pair_id(p)}")
        for engine in ["native", "aclnn", "ort"]
        for s in QK_NORM_SHAPES
        for p in PAIRS
    ),
]


@pytest.mark.parametrize("engine, shapes, pair", CASES)
def test_matches_oracle(engine, shapes, pair, rng, request):
    emulator = request.getfixturevalue("emulator") if engine == "aclnn" else None
    inputs = rms_norm_grad_inputs(rng, *shapes, *pair)
    dx, dgamma = run(engine, "RmsNormGrad", inputs)
    dx_ref, dgamma_ref = rms_norm_grad_oracle(**inputs)
    if engine != "ort":  # ORT outputs went through a Cast to float32
        assert (np.asarray(dx).dtype, np.asarray(dgamma).dtype) == (pair[0], F32)
    assert_close(dx, dx_ref, TOL[pair[0]])
    assert_close(dgamma, dgamma_ref, TOL[F32])
    if engine == "aclnn":
        assert emulator.aclemu_calls(b"aclnnRmsNormGrad") == 1
        assert host_waits(emulator) == 0  # the host never waits


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_native_and_inlined_reference_agree(pair, rng):
    inputs = rms_norm_grad_inputs(rng, (3, 5, 96), (96,), *pair)
    native = run("native", "RmsNormGrad", inputs)
    inlined = run("portable", "RmsNormGrad", inputs)
    for out, ref, tol in zip(native, inlined, [TOL[pair[0]], TOL[F32]], strict=True):
        assert_close(out, ref.astype(np.float64), tol)


@pytest.mark.parametrize("engine", ["native", *(on(engine) for engine in ENGINES)])
def test_seed_example(engine):
    # aclnnRmsNormGrad's own example: x = dy = 1..32 as [2,1,16], rstd = {1,2} shaped [2], gamma = 1..16.
    x = np.arange(1, 33, dtype=np.float32).reshape(2, 1, 16)
    inputs = {
        "dy": x,
        "x": x,
        "rstd": np.array([1, 2], np.float32),
        "gamma": np.arange(1, 17, dtype=np.float32),
    }
    dx, dgamma = run(engine, "RmsNormGrad", inputs)
    dx_ref, dgamma_ref = rms_norm_grad_oracle(**inputs)
    assert_close(dx, dx_ref, TOL[F32])
    assert_close(dgamma, dgamma_ref, TOL[F32])
    if engine != "native":
        # By hand: dgamma[j] = (j + 1)^2 * 1 + (j + 17)^2 * 2.
        j = np.arange(16)
        np.testing.assert_array_equal(dgamma, (j + 1) ** 2 + 2 * (j + 17) ** 2)


RSTD_FORMS = [(2, 1, 3, 1), (2, 1, 3), (2, 3), (1, 2, 3, 1, 1)]


@pytest.mark.parametrize(
    "engine, rstd_shape",
    [
        *(on("native", f, id=str(f)) for f in [*RSTD_FORMS, (2, 3, 1, 1)]),
        *(on(engine, f, id=str(f)) for engine in ENGINES for f in RSTD_FORMS),
    ],
)
def test_every_accepted_rstd_shape(engine, rstd_shape, rng):
    inputs = rms_norm_grad_inputs(rng, (2, 1, 3, 16), (16,), F32, F32)
    inputs["rstd"] = inputs["rstd"].reshape(rstd_shape)
    dx, dgamma = run(engine, "RmsNormGrad", inputs)
    dx_ref, dgamma_ref = rms_norm_grad_oracle(**inputs)
    assert_close(dx, dx_ref, TOL[F32])
    assert_close(dgamma, dgamma_ref, TOL[F32])


@pytest.mark.parametrize("pair", [(F32, F32), (BF16, F32)], ids=pair_id)
def test_backward_matches_finite_differences_of_forward(pair, rng):
    """<dx, v> and <dgamma, w> against central differences of L = sum(RmsNorm(x, gamma).y * dy)."""
    t, tg = pair
    x = rng.standard_normal((4, 48)).astype(t)
    gamma = (1 + 0.5 * rng.standard_normal(48)).astype(tg)
    dy = rng.standard_normal((4, 48)).astype(t)
    eps = 1e-6

    def loss(x_, gamma_):
        # float32 inputs keep the perturbation exact; the forward runs natively.
        y, _ = run("native", "RmsNorm", {"x": x_, "gamma": gamma_}, {"epsilon": eps})
        return float(np.sum(y.astype(np.float64) * dy.astype(np.float64)))

    _, rstd = run("native", "RmsNorm", {"x": x, "gamma": gamma}, {"epsilon": eps})
    dx, dgamma = run("native", "RmsNormGrad", {"dy": dy, "x": x, "rstd": rstd, "gamma": gamma})
    x32, g32 = x.astype(np.float32), gamma.astype(np.float32)
    h = np.float32(1e-2)
    vx = rng.standard_normal(x.shape).astype(np.float32)
    vg = rng.standard_normal(gamma.shape).astype(np.float32)
    for dir_x, dir_g in [(vx, 0 * vg), (0 * vx, vg)]:
        numeric = (loss(x32 + h * dir_x, g32 + h * dir_g) - loss(x32 - h * dir_x, g32 - h * dir_g)) / (2 * h)
        analytic = np.sum(dx.astype(np.float64) * dir_x) + np.sum(dgamma.astype(np.float64) * dir_g)
        assert abs(numeric - analytic) <= 2e-3 * max(1.0, abs(analytic)), (numeric, analytic)


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_bit_identical_for_any_thread_count(pair, rng):
    inputs = rms_norm_grad_inputs(rng, (1999, 300), (300,), *pair)
    runs = [run("native", "RmsNormGrad", inputs, threads=threads) for threads in (1, 2, 3, 1)]
    for other in runs[1:]:
        assert [bits(a) for a in other] == [bits(a) for a in runs[0]]


def test_empty_rows_give_zero_dgamma():
    inputs = {
        "dy": np.zeros((0, 4, 8), np.float32),
        "x": np.zeros((0, 4, 8), np.float32),
        "rstd": np.zeros((0, 4, 1), np.float32),
        "gamma": np.ones(8, np.float32),
    }
    dx, dgamma = run("native", "RmsNormGrad", inputs)
    assert dx.shape == (0, 4, 8)
    np.testing.assert_array_equal(dgamma, np.zeros(8, np.float32))


def isa_outputs(rng):
    """Every dtype pair, rows with and without a tail of columns past the last 16, and one output
    large enough for streaming stores."""
    outputs = []
    shapes = [(7, 333), (5, 64), (3, 1000), (2, 17), (4, 48)]
    streamed = [((F32, F32), (1100, 2048)), ((BF16, BF16), (2100, 2048))]  # outputs past 8 MiB
    for (t, tg), (rows, cols) in [*zip(PAIRS, shapes, strict=True), *streamed]:
        x, dy = (rng.standard_normal((rows, cols)).astype(t) for _ in range(2))
        rstd = (1 / np.sqrt(np.mean(x.astype(np.float32) ** 2, -1, keepdims=True) + 1e-6)).astype(np.float32)
        gamma = rng.standard_normal(cols).astype(tg)
        outputs += run("native", "RmsNormGrad", {"dy": dy, "x": x, "rstd": rstd, "gamma": gamma})
    return outputs


def test_avx512_paths_give_avx2_bits(tmp_path):
    """The plain loops sum dx's dot products in 8 lanes, the vector paths in 16: those are held to
    the oracle (test_baseline_isa_matches_oracle)."""
    assert_plain_loops_give_avx2_bits(isa_outputs, tmp_path, plain=False)


def test_baseline_isa_matches_oracle():
    """The plain loops the library falls back to on CPUs without AVX2, forced by the environment."""
    assert_capped_isa_matches_oracle("rms_norm", "baseline")


def ones(shape, dtype=np.float32):
    return np.ones(shape, dtype)


BAD_INPUTS = [
    ("gamma shape", {"gamma": ones(4)}, "gamma.shape == x.shape[n:]"),
    ("gamma rank 0", {"gamma": ones(())}, "1 <= rank(gamma) <= rank(x)"),
    ("gamma rank above x", {"gamma": ones((1, 2, 3))}, "1 <= rank(gamma) <= rank(x)"),
    ("x rank 0", {"x": ones(()), "dy": ones(())}, "rank 0"),
    ("rstd count", {"rstd": ones(3)}, "input 'rstd'"),
    ("rstd flattened", {"x": ones((2, 2, 3)), "dy": ones((2, 2, 3)), "rstd": ones(4)}, "input 'rstd'"),
    ("dy shape", {"dy": ones((2, 4))}, "input 'dy'"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=lambda c: c[0])
def test_bad_input_is_an_ort_error_naming_op_and_rule(case):
    _, change, rule = case
    inputs = {"dy": ones((2, 3)), "x": ones((2, 3)), "rstd": ones((2, 1)), "gamma": ones(3)} | change
    with pytest.raises(InvalidArgument) as error:
        run("native", "RmsNormGrad", inputs, raw={"dx": np.float32, "dgamma": np.float32})
    assert "RmsNormGrad" in str(error.value) and rule in str(error.value)
    # The process goes on, and the next valid call works.
    dx, _ = run(
        "native",
        "RmsNormGrad",
        {"dy": ones((2, 3)), "x": ones((2, 3)), "rstd": ones((2, 1)), "gamma": ones(3)},
    )
    assert dx.shape == (2, 3)


@pytest.mark.parametrize("t, tg", [(F32, F16), (F32, BF16), (F16, BF16), (BF16, F16)], ids=str)
def test_type_pair_outside_the_table_is_an_error_naming_the_types(t, tg):
    inputs = {"dy": ones((2, 3), t), "x": ones((2, 3), t), "rstd": ones((2, 1)), "gamma": ones(3, tg)}
    with pytest.raises(InvalidArgument) as error:
        run("native", "RmsNormGrad", inputs, raw={"dx": t, "dgamma": np.float32})
    message = str(error.value)
    assert "RmsNormGrad" in message and "not an allowed (T, TG) pair" in message
    names = {F32: "float32", F16: "float16", BF16: "bfloat16"}
    assert f"'x' ({names[t]})" in message and f"'gamma' ({names[tg]})" in message
