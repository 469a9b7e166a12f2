"""RotaryPositionEmbedding against the float64 oracle on every engine (the kernels on every mode,
layout and dtype), the native kernel against the inlined reference, and its error rules."""

import numpy as np
import pytest
from aclnn_checks import host_waits
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
from test_aclnn_rotary_position_embedding import CASES as ACLNN_CASES

from engines import ENGINES, on, run
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
# The reference functions: all layouts in float32; the half types on one layout per data layout,
# with broadcast tables.
REFERENCE_CASES = [(layout, F32) for layout in ROPE_LAYOUTS] + [
    (layout, t)
    for layout in ROPE_LAYOUTS
    if layout[0] in ("BNSD-11SD", "BSND-BS1D", "TND-T1D")
    for t in (F16, BF16)
]


def oracle_cases(aclnn_cases):
    """(engine, soc, mode, layout, t): the kernels on every layout, mode and dtype (aclnn on those
    each product takes, aclnn_cases), the reference functions on REFERENCE_CASES."""
    return [
        *(
            on("native", None, mode, layout, t, id=f"{layout[0]}-{mode}-{t.name}")
            for layout in ROPE_LAYOUTS + ROPE_OTHER_D
            for mode in ROPE_MODES
            for t in DTYPES
        ),
        *(
            on("aclnn", soc, mode, layout, t, id=f"{soc.decode()}-{mode}-{layout[0]}-{t.name}")
            for soc, mode, layout in aclnn_cases
            for t in DTYPES
        ),
        *(
            on(engine, None, mode, layout, t, id=f"{layout[0]}-{t.name}-{mode}")
            for engine in ENGINES
            for layout, t in REFERENCE_CASES
            for mode in ROPE_MODES
        ),
    ]


@pytest.mark.parametrize("engine, soc, mode, layout, t", oracle_cases(ACLNN_CASES))
def test_matches_oracle(engine, soc, mode, layout, t, rng, request):
    if engine == "aclnn":
        emulator = request.getfixturevalue("emulator")
        emulator.aclemu_set_soc(soc)
    inputs = rope_inputs(rng, layout, t, "x", "cos", "sin")
    (y,) = run(engine, "RotaryPositionEmbedding", inputs, {"mode": mode})
    if engine != "ort":  # ORT outputs went through a Cast to float32
        assert np.asarray(y).dtype == t
    assert_close(y, rope_oracle(**inputs, mode=mode), TOL[t])
    if engine == "aclnn":
        assert host_waits(emulator) == 0


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
