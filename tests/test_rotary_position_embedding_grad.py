"""RotaryPositionEmbeddingGrad against the float64 oracle on every engine (the kernels on every
mode, layout and dtype), with and without x; the native kernel against the inlined reference and
finite differences of the native forward, and its error rules."""

import numpy as np
import pytest
from aclnn_checks import host_waits
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
from test_aclnn_rotary_position_embedding import GRAD_CASES
from test_rotary_position_embedding import DTYPES, oracle_cases

from engines import ENGINES, on, run
from harness import assert_capped_isa_matches_oracle, bits, run_placed
from oracles import (
    BF16,
    F16,
    F32,
    ROPE_LAYOUTS,
    ROPE_MODES,
    ROPE_OTHER_D,
    ROPE_SEED_COS,
    ROPE_SEED_DY,
    ROPE_SEED_SIN,
    TOL,
    assert_close,
    rope_grad_oracle,
    rope_inputs,
)

# Sums over many rows in half types lose more than one rounding: a looser bound for dcos/dsin.
SUM_TOL = {F32: 1e-5, F16: 4e-3, BF16: 2e-2}
# Row lengths off the vector paths (D/2 or D/4 not a multiple of 8) take the plain loops.


@pytest.mark.parametrize("engine, soc, mode, layout, t", oracle_cases(GRAD_CASES))
def test_matches_oracle(engine, soc, mode, layout, t, rng, request):
    if engine == "aclnn":
        emulator = request.getfixturevalue("emulator")
        emulator.aclemu_set_soc(soc)
    inputs = rope_inputs(rng, layout, t, "dy", "cos", "sin", "x")
    dx, dcos, dsin = run(engine, "RotaryPositionEmbeddingGrad", inputs, {"mode": mode})
    dx_ref, dcos_ref, dsin_ref = rope_grad_oracle(**inputs, mode=mode)
    if engine != "ort":  # ORT outputs went through a Cast to float32
        assert np.asarray(dx).dtype == np.asarray(dcos).dtype == np.asarray(dsin).dtype == t
    # The reference functions' sums meet the tighter bound.
    sum_tol = (TOL if engine in ENGINES else SUM_TOL)[t]
    assert_close(dx, dx_ref, TOL[t])
    assert_close(dcos, dcos_ref, sum_tol)
    assert_close(dsin, dsin_ref, sum_tol)
    if engine == "aclnn":
        assert host_waits(emulator) == 0


@pytest.mark.parametrize(
    "engine, layout, mode, t",
    [
        *(on("native", ROPE_LAYOUTS[3], m, t, id=f"{m}-{t.name}") for m in ROPE_MODES for t in DTYPES),
        *(on("aclnn", ROPE_LAYOUTS[3], m, F16, id=f"{m}") for m in (0, 1)),
        *(
            on(engine, ROPE_LAYOUTS[0], m, t, id=f"{t.name}-{m}")
            for engine in ENGINES
            for m in ROPE_MODES
            for t in DTYPES
        ),
    ],
)
def test_without_x_only_dx(engine, layout, mode, t, rng, request):
    """The node has no x and produces dx alone."""
    if engine == "aclnn":
        request.getfixturevalue("emulator")
    inputs = rope_inputs(rng, layout, t, "dy", "cos", "sin")
    outputs = run(engine, "RotaryPositionEmbeddingGrad", inputs, {"mode": mode})
    assert len(outputs) == 1
    assert_close(outputs[0], rope_grad_oracle(**inputs, x=None, mode=mode)[0], TOL[t])


@pytest.mark.parametrize("mode", ROPE_MODES)
def test_native_and_inlined_reference_agree(mode, rng):
    inputs = rope_inputs(rng, ROPE_LAYOUTS[3], F32, "dy", "cos", "sin", "x")
    native = run("native", "RotaryPositionEmbeddingGrad", inputs, {"mode": mode})
    inlined = run("portable", "RotaryPositionEmbeddingGrad", inputs, {"mode": mode})
    for out, ref in zip(native, inlined, strict=True):
        assert_close(out, ref.astype(np.float64), TOL[F32])


@pytest.mark.parametrize("engine", ["native", *(on(engine) for engine in ENGINES)])
def test_seed_example(engine):
    """The aclnn page's example: mode 1, dy/cos/sin [1,1,1,128] with the page's values, no x."""
    inputs = {
        name: np.array(values, np.float32).reshape(1, 1, 1, 128)
        for name, values in [("dy", ROPE_SEED_DY), ("cos", ROPE_SEED_COS), ("sin", ROPE_SEED_SIN)]
    }
    (dx,) = run(engine, "RotaryPositionEmbeddingGrad", inputs, {"mode": 1})
    assert_close(dx, rope_grad_oracle(**inputs, x=None, mode=1)[0], TOL[F32])
    if engine != "native":
        # By hand, the first pair: (cos[0] * dy[0] + sin[1] * dy[1], cos[1] * dy[1] - sin[0] * dy[0]).
        np.testing.assert_array_equal(dx[0, 0, 0, :2], [41 * 74 + 56 * 54, 37 * 54 - 46 * 74])


@pytest.mark.parametrize("mode", ROPE_MODES)
def test_backward_matches_finite_differences_of_forward(mode, rng):
    """<dx, u> + <dcos, v> + <dsin, w> against central differences of L = sum(RoPE(x, cos, sin) * dy)."""
    inputs = rope_inputs(rng, ROPE_LAYOUTS[0], F32, "dy", "cos", "sin", "x")
    dy = inputs.pop("dy")
    dx, dcos, dsin = run("native", "RotaryPositionEmbeddingGrad", {"dy": dy} | inputs, {"mode": mode})

    def loss(values):
        (y,) = run("native", "RotaryPositionEmbedding", values, {"mode": mode})
        return float(np.sum(y.astype(np.float64) * dy))

    h = np.float32(1e-2)
    for name, grad in [("x", dx), ("cos", dcos), ("sin", dsin)]:
        v = rng.standard_normal(inputs[name].shape).astype(np.float32)
        numeric = (
            loss(inputs | {name: inputs[name] + h * v}) - loss(inputs | {name: inputs[name] - h * v})
        ) / (2 * h)
        analytic = float(np.sum(grad.astype(np.float64) * v))
        assert abs(numeric - analytic) <= 2e-3 * max(1.0, abs(analytic)), (name, numeric, analytic)


@pytest.mark.parametrize("t", DTYPES, ids=lambda t: t.name)
@pytest.mark.parametrize(
    "table_shape",
    [(1, 64, 1, 32), (1, 1, 1, 32), (3, 64, 5, 32)],
    ids=["few cos rows", "one cos row", "no broadcast"],
)
def test_bit_identical_for_any_thread_count(table_shape, t, rng):
    inputs = rope_inputs(rng, ("BSND", (3, 64, 5, 32), table_shape), t, "dy", "cos", "sin", "x")
    runs = [
        run("native", "RotaryPositionEmbeddingGrad", inputs, {"mode": 0}, threads=n) for n in (1, 2, 3, 1)
    ]
    for other in runs[1:]:
        assert [bits(a) for a in other] == [bits(a) for a in runs[0]]


def test_empty_dy_gives_zero_sums():
    inputs = {
        "dy": np.zeros((0, 5, 3, 8), np.float32),
        "cos": np.ones((1, 5, 1, 8), np.float32),
        "sin": np.ones((1, 5, 1, 8), np.float32),
        "x": np.zeros((0, 5, 3, 8), np.float32),
    }
    dx, dcos, dsin = run("native", "RotaryPositionEmbeddingGrad", inputs)
    assert dx.shape == (0, 5, 3, 8)
    np.testing.assert_array_equal(dcos, np.zeros((1, 5, 1, 8), np.float32))
    np.testing.assert_array_equal(dsin, np.zeros((1, 5, 1, 8), np.float32))


def test_baseline_isa_matches_oracle():
    assert_capped_isa_matches_oracle("rope", "baseline")


def ones(shape, dtype=np.float32):
    return np.ones(shape, dtype)


def ones_inputs(d=8, cos_shape=None, x_shape=None, sin_shape=None):
    cos_shape = cos_shape or (1, 5, 1, d)
    return {
        "dy": ones((2, 5, 3, d)),
        "cos": ones(cos_shape),
        "sin": ones(sin_shape or cos_shape),
        "x": ones(x_shape or (2, 5, 3, d)),
    }


BAD_INPUTS = [
    ("odd D in mode 0", ones_inputs(d=7), 0, "must be even in modes 0, 1 and 3"),
    ("odd D in mode 1", ones_inputs(d=7), 1, "must be even in modes 0, 1 and 3"),
    ("odd D in mode 3", ones_inputs(d=7), 3, "must be even in modes 0, 1 and 3"),
    ("D=6 in mode 2", ones_inputs(d=6), 2, "a multiple of 4 in mode 2"),
    ("mode 4", ones_inputs(), 4, "attribute 'mode' is 4"),
    ("mode -1", ones_inputs(), -1, "attribute 'mode' is -1"),
    ("cos and sin differ", ones_inputs(sin_shape=(2, 5, 1, 8)), 0, "must have the same shape"),
    ("cos not broadcastable", ones_inputs(cos_shape=(1, 4, 1, 8)), 0, "broadcast to it unchanged"),
    ("last axis broadcast", ones_inputs(cos_shape=(1, 5, 1, 1)), 0, "the last axis never broadcast"),
    ("cos of lower rank", ones_inputs(cos_shape=(5, 1, 8)), 0, "must have the rank"),
    ("x of another shape", ones_inputs(x_shape=(2, 5, 2, 8)), 0, "input 'x'"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=lambda c: c[0])
def test_bad_input_is_an_ort_error_naming_op_and_rule(case):
    _, inputs, mode, rule = case
    outputs = {"dx": np.float32, "dcos": np.float32, "dsin": np.float32}
    with pytest.raises(InvalidArgument) as error:
        run("native", "RotaryPositionEmbeddingGrad", inputs, {"mode": mode}, raw=outputs)
    assert "RotaryPositionEmbeddingGrad" in str(error.value) and rule in str(error.value)


def test_sums_without_x_are_an_error():
    inputs = {k: v for k, v in ones_inputs().items() if k != "x"}
    with pytest.raises(InvalidArgument) as error:
        run(
            "native",
            "RotaryPositionEmbeddingGrad",
            inputs,
            raw={"dx": np.float32, "dcos": np.float32, "dsin": np.float32},
        )
    assert "RotaryPositionEmbeddingGrad" in str(error.value) and "need input 'x'" in str(error.value)


def test_mixed_dtypes_are_refused_naming_the_op():
    inputs = ones_inputs() | {"cos": ones((1, 5, 1, 8), F16), "sin": ones((1, 5, 1, 8), F16)}
    with pytest.raises(Exception, match="RotaryPositionEmbeddingGrad"):
        run(
            "native",
            "RotaryPositionEmbeddingGrad",
            inputs,
            raw={"dx": np.float32, "dcos": np.float16, "dsin": np.float16},
        )


@pytest.mark.parametrize("t", DTYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("mode", ROPE_MODES)
@pytest.mark.parametrize("layout", ROPE_OTHER_D[1:], ids=lambda layout: layout[0])
@pytest.mark.parametrize("with_x", [False, True], ids=["no x", "x"])
def test_same_bits_wherever_the_tensors_start_in_a_page(layout, with_x, mode, t, rng):
    """Where dx starts just ahead of dy or x within a 4 KiB page (NumPy's inputs 16 bytes in, ONNX
    Runtime's outputs 64), the row loops walk down the pairs: the results must not change."""
    inputs = rope_inputs(rng, layout, t, "dy", "cos", "sin", *(["x"] if with_x else []))
    shapes = {"dx": inputs["dy"].shape} | (
        {"dcos": inputs["cos"].shape, "dsin": inputs["sin"].shape} if with_x else {}
    )
    outputs = {name: (t, shape) for name, shape in shapes.items()}
    attrs = {"mode": mode}
    ahead = run_placed("RotaryPositionEmbeddingGrad", inputs, attrs, outputs, 16, 64)
    apart = run_placed("RotaryPositionEmbeddingGrad", inputs, attrs, outputs, 16, 2064)
    assert [bits(a) for a in ahead] == [bits(a) for a in apart]
    refs = rope_grad_oracle(inputs["dy"], inputs["cos"], inputs["sin"], inputs.get("x"), mode)
    for out, ref, tol in zip(ahead, refs, (TOL[t], SUM_TOL[t], SUM_TOL[t]), strict=False):
        assert_close(out, ref, tol)
