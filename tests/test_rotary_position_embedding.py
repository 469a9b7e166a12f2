"""The native RotaryPositionEmbedding kernel against the float64 oracle (every mode, layout and
dtype) and the inlined reference, and its error rules."""

import numpy as np
import pytest
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

from engines import run
from harness import bits, run_placed
from oracles import (
    BF16,
    F16,
    F32,
    ROPE_LAYOUTS,
    ROPE_MODES,
    ROPE_OTHER_D,
    TOL,
    assert_close,
    rope_inputs,
    rope_oracle,
)

DTYPES = [F32, F16, BF16]


@pytest.mark.parametrize("t", DTYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("mode", ROPE_MODES)
@pytest.mark.parametrize("layout", ROPE_LAYOUTS + ROPE_OTHER_D, ids=lambda layout: layout[0])
def test_native_matches_oracle(layout, mode, t, rng):
    if mode == 2 and layout[1][-1] % 4:
        pytest.skip("mode 2 needs D % 4 == 0")
    inputs = rope_inputs(rng, layout, t, "x", "cos", "sin")
    (y,) = run("native", "RotaryPositionEmbedding", inputs, {"mode": mode})
    assert y.dtype == t
    assert_close(y, rope_oracle(**inputs, mode=mode), TOL[t])


@pytest.mark.parametrize("mode", ROPE_MODES)
def test_native_and_inlined_reference_agree(mode, rng):
    inputs = rope_inputs(rng, ROPE_LAYOUTS[3], F32, "x", "cos", "sin")
    (native,) = run("native", "RotaryPositionEmbedding", inputs, {"mode": mode})
    (inlined,) = run("portable", "RotaryPositionEmbedding", inputs, {"mode": mode})
    assert_close(native, inlined.astype(np.float64), TOL[F32])


@pytest.mark.parametrize("t", DTYPES, ids=lambda t: t.name)
def test_bit_identical_for_any_thread_count(t, rng):
    inputs = rope_inputs(rng, ("BSND", (3, 64, 5, 32), (1, 64, 1, 32)), t, "x", "cos", "sin")
    runs = [run("native", "RotaryPositionEmbedding", inputs, {"mode": 1}, threads=n) for n in (1, 2, 3)]
    assert bits(runs[1][0]) == bits(runs[0][0]) == bits(runs[2][0])


def ones(shape, dtype=np.float32):
    return np.ones(shape, dtype)


@pytest.mark.parametrize(
    "x_shape, cos_shape, mode, rule",
    [
        ((2, 5, 3, 7), (1, 5, 1, 7), 0, "must be even in modes 0, 1 and 3"),
        ((2, 5, 3, 6), (1, 5, 1, 6), 2, "a multiple of 4 in mode 2"),
        ((2, 5, 3, 8), (1, 5, 1, 8), 7, "attribute 'mode' is 7"),
        ((2, 5, 3, 8), (1, 4, 1, 8), 0, "broadcast to it unchanged"),
        ((), (8,), 0, "rank 0"),
    ],
    ids=["odd D", "D=6 in mode 2", "mode 7", "cos not broadcastable", "x rank 0"],
)
def test_bad_input_is_an_ort_error_naming_op_and_rule(x_shape, cos_shape, mode, rule):
    inputs = {"x": ones(x_shape), "cos": ones(cos_shape), "sin": ones(cos_shape)}
    with pytest.raises(InvalidArgument) as error:
        run("native", "RotaryPositionEmbedding", inputs, {"mode": mode}, raw={"y": np.float32})
    assert "RotaryPositionEmbedding" in str(error.value) and rule in str(error.value)


@pytest.mark.parametrize("t", DTYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("mode", ROPE_MODES)
@pytest.mark.parametrize("layout", ROPE_OTHER_D[1:], ids=lambda layout: layout[0])
def test_same_bits_wherever_the_tensors_start_in_a_page(layout, mode, t, rng):
    """Where y starts just ahead of x within a 4 KiB page (NumPy's x 16 bytes in, ONNX Runtime's y
    64), the row loops walk down the pairs: the results must not change."""
    inputs = rope_inputs(rng, layout, t, "x", "cos", "sin")
    outputs = {"y": (t, inputs["x"].shape)}
    (ahead,) = run_placed("RotaryPositionEmbedding", inputs, {"mode": mode}, outputs, 16, 64)
    (apart,) = run_placed("RotaryPositionEmbedding", inputs, {"mode": mode}, outputs, 16, 2064)
    assert bits(ahead) == bits(apart)
    assert_close(ahead, rope_oracle(**inputs, mode=mode), TOL[t])
