"""NonFiniteCheckAndUnscale against the float64 oracle on every engine and bit for bit against
torch's own unscale_ kernel, in place under ONNX Runtime's alias map, the plain loops against the
AVX2 path bit for bit, and its errors."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from engines import ENGINES, on, run
from harness import assert_plain_loops_give_avx2_bits
from oracles import F32, TOL, UNSCALE_TYPES, assert_close, unscale_inputs, unscale_oracle
from ort_ascend_ops.runtime import _as_numpy, ortvalue_view, session_options

OP = "NonFiniteCheckAndUnscale"
SHAPES = [(5,), (3, 7), (2, 3, 40), (70_001,), (), (0,)]
POISONS = [None, np.inf, -np.inf, np.nan]
CASES = [  # (engine, shape, type, poison, found_inf given)
    *(
        on("native", s, t, p, f, id=f"{s}-{t}-{p}-{f}")
        for s in SHAPES
        for t in UNSCALE_TYPES
        for p in POISONS
        for f in (0.0, 1.0)
    ),
    *(
        on("aclnn", s, t, p, 0.0, id=f"{s}-{t}-{p}")
        for s in SHAPES[:3] + SHAPES[4:]
        for t in UNSCALE_TYPES
        for p in POISONS[:2]
    ),
    *(
        on(e, s, t, p, 0.0, id=f"{s}-{t}-{p}")
        for e in ENGINES
        for s in SHAPES[:3]
        for t in UNSCALE_TYPES
        for p in POISONS
    ),
]


@pytest.mark.parametrize("engine, shape, t, poison, found", CASES)
def test_matches_oracle(engine, shape, t, poison, found, rng, request):
    if engine == "aclnn":
        request.getfixturevalue("emulator")
    inputs = unscale_inputs(rng, shape, t, found=found, poison=poison)
    grads, flag = run(engine, OP, inputs)
    ref_grads, ref_flag = unscale_oracle(**inputs)
    assert grads.shape == ref_grads.shape
    assert grads.dtype == (F32 if engine == "ort" else t)  # "ort" returns float32 (engines.py)
    finite = np.isfinite(ref_grads)
    np.testing.assert_array_equal(grads.astype(np.float64)[~finite], ref_grads[~finite])  # inf and NaN kept
    assert_close(grads.astype(np.float64)[finite], ref_grads[finite], TOL[t])
    np.testing.assert_array_equal(flag, ref_flag)


@pytest.mark.parametrize("t", UNSCALE_TYPES, ids=str)
def test_gives_torch_unscale_bits(t, rng):
    """torch's _amp_foreach_non_finite_check_and_unscale_ (GradScaler.unscale_'s kernel) on the
    same gradients: the same bits and the same flag."""
    torch = pytest.importorskip("torch")
    import ml_dtypes

    for poison in (None, np.nan):
        inputs = unscale_inputs(rng, (3, 1111), t, poison=poison)
        grads, flag = run("native", OP, inputs)
        wide = inputs["scaled_grads"].astype(F32)
        dtype = {np.dtype(np.float16): torch.float16, np.dtype(ml_dtypes.bfloat16): torch.bfloat16}.get(
            t, torch.float32
        )
        theirs = torch.from_numpy(wide).to(dtype)
        found = torch.zeros(1)
        torch._amp_foreach_non_finite_check_and_unscale_(
            [theirs], found, torch.from_numpy(inputs["inv_scale"])
        )
        np.testing.assert_array_equal(grads.astype(F32), theirs.float().numpy())
        np.testing.assert_array_equal(flag, found.numpy())


def _chain_model(n):
    """Two nodes ORing their tests, the gradients updated where they are: no graph outputs but
    the flag, so ORT makes each node's gradients output the input's buffer (the alias map)."""
    nodes = [
        helper.make_node(OP, ["a", "zero", "inv"], ["a_out", "found_a"], domain="ort_ascend_ops"),
        helper.make_node(OP, ["b", "found_a", "inv"], ["b_out", "found"], domain="ort_ascend_ops"),
    ]
    value = lambda name, s: helper.make_tensor_value_info(name, TensorProto.FLOAT, s)  # noqa: E731
    inputs = [value("a", [n]), value("b", [n]), value("zero", [1]), value("inv", [1])]
    graph = helper.make_graph(nodes, "unscale", inputs, [value("found", [1])])
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ort_ascend_ops", 1)]
    )


@pytest.mark.parametrize("bad", [None, "a", "b"])
def test_unscales_in_place_and_a_chain_ors_the_tests(bad, rng):
    n = 4099
    session = ort.InferenceSession(_chain_model(n).SerializeToString(), session_options())
    arrays = {
        k: unscale_inputs(rng, (n,), F32, poison=np.inf if bad == k else None)["scaled_grads"] for k in "ab"
    }
    values = {k: ortvalue_view(a.copy()) for k, a in arrays.items()}
    where = {k: v.data_ptr() for k, v in values.items()}
    binding = session.io_binding()
    for name, value in values.items():
        binding.bind_ortvalue_input(name, value)
    binding.bind_cpu_input("zero", np.zeros(1, F32))
    binding.bind_cpu_input("inv", np.array([0.25], F32))
    binding.bind_output("found")
    session.run_with_iobinding(binding)
    assert {k: v.data_ptr() for k, v in values.items()} == where
    for k, value in values.items():
        np.testing.assert_array_equal(_as_numpy(value), arrays[k] * np.float32(0.25))
    assert binding.get_outputs()[0].numpy().tolist() == [0.0 if bad is None else 1.0]


@pytest.mark.parametrize("engine", ["native", *(on(e) for e in ENGINES[1:2])])
@pytest.mark.parametrize(
    "change, word",
    [
        (lambda i: i | {"found_inf": np.zeros(2, F32)}, "found_inf"),
        (lambda i: i | {"inv_scale": np.ones((1, 2), F32)}, "inv_scale"),
        (lambda i: i | {"inv_scale": np.ones(0, F32)}, "inv_scale"),
    ],
)
def test_refuses_broken_rules(engine, change, word, rng):
    with pytest.raises(Exception, match=f"(?s){OP}.*{word}.*one value"):
        run(engine, OP, change(unscale_inputs(rng, (6,), F32)))


def unscale_outputs(rng):
    """Every type, with and without a NaN, for the ISA comparison."""
    outputs = []
    for t in UNSCALE_TYPES:
        for poison in (None, np.nan):
            outputs += run("native", OP, unscale_inputs(rng, (3, 1111), t, poison=poison))
    return outputs


def test_the_plain_loops_give_the_avx2_paths_bits(tmp_path):
    assert_plain_loops_give_avx2_bits(unscale_outputs, tmp_path)
