"""RmsNorm against the float64 oracle on every engine (the kernels and the reference functions),
the native kernel against the inlined reference, and its errors."""

import numpy as np
import pytest
from aclnn_checks import host_waits
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

from engines import ENGINES, on, run
from harness import bits
from oracles import BF16, F16, F32, PAIRS, SHAPES, TOL, assert_close, pair_id, rms_norm_oracle

# The kernels' own paths: a row length that is no multiple of the vector width, more rows than
# blocks, a single short row.
NATIVE_SHAPES = SHAPES + [((5, 7, 333), (333,)), ((300, 1024), (1024,)), ((1, 1, 3), (3,))]
# aclnn's tiling refuses empty normalized axes (test_aclnn_rms_norm.py).
ACLNN_SHAPES = [s for s in SHAPES if s[1] != (0,)]
CASES = [  # (engine, shapes, pair, epsilon: None leaves the attribute out)
    *(on("native", s, p, None, id=f"{s}-{pair_id(p)}") for s in NATIVE_SHAPES for p in PAIRS),
    *(
        on("aclnn", s, p, e, id=f"{s}-{pair_id(p)}-{e}")
        for s in ACLNN_SHAPES
        for p in PAIRS
        for e in (None, 1e-3)
    ),
    *(on(engine, s, p, None, id=f"{s}-{pair_id(p)}") for engine in ENGINES for s in SHAPES for p in PAIRS),
]


@pytest.mark.parametrize("engine, shapes, pair, epsilon", CASES)
def test_matches_oracle(engine, shapes, pair, epsilon, rng, request):
    emulator = request.getfixturevalue("emulator") if engine == "aclnn" else None
    inputs = {
        "x": rng.standard_normal(shapes[0]).astype(pair[0]),
        "gamma": rng.standard_normal(shapes[1]).astype(pair[1]),
    }
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    y, rstd = run(engine, "RmsNorm", inputs, attrs)
    y_ref, rstd_ref = rms_norm_oracle(**inputs, epsilon=1e-6 if epsilon is None else epsilon)
    if engine != "ort":  # ORT outputs went through a Cast to float32
        assert (np.asarray(y).dtype, np.asarray(rstd).dtype) == (pair[0], F32)
    assert np.asarray(rstd).shape == rstd_ref.shape  # keepdims form
    assert_close(y, y_ref, TOL[pair[0]])
    assert_close(rstd, rstd_ref, TOL[F32])
    if engine == "aclnn":
        # aclnn's tiling refuses empty tensors: the backend does not call it for them.
        assert emulator.aclemu_calls(b"aclnnRmsNorm") == (1 if y.size else 0)
        assert host_waits(emulator) == 0


@pytest.mark.parametrize("epsilon", [1e-5, 0.5])
@pytest.mark.parametrize("engine", ["native", *(on(e) for e in ENGINES)])
def test_epsilon_attribute(engine, epsilon, rng):
    x = (0.01 * rng.standard_normal((6, 40))).astype(np.float32)  # small enough for epsilon to matter
    gamma = rng.standard_normal(40).astype(np.float32)
    y, rstd = run(engine, "RmsNorm", {"x": x, "gamma": gamma}, {"epsilon": epsilon})
    y_ref, rstd_ref = rms_norm_oracle(x, gamma, epsilon)
    assert_close(y, y_ref, TOL[F32])
    assert_close(rstd, rstd_ref, TOL[F32])


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_native_and_inlined_reference_agree(pair, rng):
    inputs = {
        "x": rng.standard_normal((3, 5, 96)).astype(pair[0]),
        "gamma": rng.standard_normal(96).astype(pair[1]),
    }
    native = run("native", "RmsNorm", inputs)
    inlined = run("portable", "RmsNorm", inputs)
    for out, ref, tol in zip(native, inlined, [TOL[pair[0]], TOL[F32]], strict=True):
        assert_close(out, ref.astype(np.float64), tol)


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_bit_identical_for_any_thread_count(pair, rng):
    inputs = {
        "x": rng.standard_normal((1999, 300)).astype(pair[0]),
        "gamma": rng.standard_normal(300).astype(pair[1]),
    }
    runs = [run("native", "RmsNorm", inputs, threads=threads) for threads in (1, 2, 3, 1)]
    for other in runs[1:]:
        assert [bits(a) for a in other] == [bits(a) for a in runs[0]]


def test_empty_normalized_extent_gives_rstd_of_epsilon():
    y, rstd = run(
        "native",
        "RmsNorm",
        {"x": np.ones((3, 0), np.float32), "gamma": np.ones(0, np.float32)},
        {"epsilon": 0.25},
    )
    assert y.shape == (3, 0)
    np.testing.assert_array_equal(rstd, np.full((3, 1), 2.0, np.float32))


def ones(shape, dtype=np.float32):
    return np.ones(shape, dtype)


@pytest.mark.parametrize(
    "x, gamma, rule",
    [
        (ones((2, 3)), ones(4), "gamma.shape == x.shape[n:]"),
        (ones((2, 3)), ones(()), "1 <= rank(gamma) <= rank(x)"),
        (ones(3), ones((1, 3)), "1 <= rank(gamma) <= rank(x)"),
        (ones(()), ones(1), "rank 0"),
    ],
    ids=["gamma shape", "gamma rank 0", "gamma rank above x", "x rank 0"],
)
def test_bad_input_is_an_ort_error_naming_op_and_rule(x, gamma, rule):
    with pytest.raises(InvalidArgument) as error:
        run("native", "RmsNorm", {"x": x, "gamma": gamma}, raw={"y": np.float32, "rstd": np.float32})
    assert "RmsNorm" in str(error.value) and rule in str(error.value)


@pytest.mark.parametrize("t, tg", [(F32, F16), (F32, BF16), (F16, BF16), (BF16, F16)], ids=str)
def test_type_pair_outside_the_table_is_an_error_naming_the_types(t, tg):
    with pytest.raises(InvalidArgument) as error:
        run(
            "native",
            "RmsNorm",
            {"x": ones((2, 3), t), "gamma": ones(3, tg)},
            raw={"y": t, "rstd": np.float32},
        )
    assert "RmsNorm" in str(error.value) and "not an allowed (T, TG) pair" in str(error.value)
