"""ApplyAdamW against the float64 oracle on every engine, against torch.optim.AdamW over many
steps, in place under ONNX Runtime's alias map, the plain loops against the AVX2 path bit for bit,
and its errors."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from engines import ENGINES, on, run
from harness import assert_plain_loops_give_avx2_bits
from oracles import ADAMW_PAIRS, F32, TOL, adam_w_inputs, adam_w_oracle, assert_close, pair_id
from ort_ascend_ops.runtime import session_options

SHAPES = [(5,), (3, 7), (2, 3, 40), (70_000,), (0,)]
STREAMED = (2_200_001,)  # float32 outputs past 8 MiB, not in place: streaming stores, an odd tail
ATTRS = [{}, {"beta1": 0.8, "beta2": 0.99, "weight_decay": 0.1, "eps": 1e-6}, {"maximize": 1}, {"beta1": 0.3}]
CASES = [  # (engine, shape, (TP, T), attrs)
    *(
        on("native", s, p, a, id=f"{s}-{pair_id(p)}-{i}")
        for s in SHAPES
        for p in ADAMW_PAIRS
        for i, a in enumerate(ATTRS)
    ),
    *(on("aclnn", s, p, {}, id=f"{s}-{pair_id(p)}") for s in SHAPES[:3] for p in ADAMW_PAIRS if p[0] == p[1]),
    on("native", STREAMED, (F32, F32), {}, id="streamed-outputs"),
    *(
        on(e, s, p, a, id=f"{s}-{pair_id(p)}-{i}")
        for e in ENGINES
        for s in SHAPES[:3]
        for p in ADAMW_PAIRS[:2]
        for i, a in enumerate(ATTRS)
    ),
]


@pytest.mark.parametrize("engine, shape, pair, attrs", CASES)
def test_matches_oracle(engine, shape, pair, attrs, rng, request):
    if engine == "aclnn":
        request.getfixturevalue("emulator")
    inputs = adam_w_inputs(rng, shape, *pair, step=int(rng.integers(1, 50)))
    outputs = run(engine, "ApplyAdamW", inputs, attrs)
    for out, ref in zip(outputs, adam_w_oracle(**inputs, **attrs), strict=True):
        assert_close(out, ref, TOL[pair[0]])


def _adam_w_model(n):
    """One ApplyAdamW whose outputs only feed a Size: they are no graph outputs, so ORT makes them
    the inputs' buffers (the alias map) and the update lands in the caller's tensors."""
    names = ["param", "exp_avg", "exp_avg_sq", "grad"]
    nodes = [
        helper.make_node(
            "ApplyAdamW", [*names, "step", "lr"], ["p", "m", "v"], domain="ort_ascend_ops", weight_decay=0.05
        )
    ]
    nodes += [helper.make_node("Size", [o], [f"{o}_size"]) for o in "pmv"]
    nodes += [
        helper.make_node("Add", ["p_size", "m_size"], ["pm"]),
        helper.make_node("Add", ["pm", "v_size"], ["n"]),
    ]
    value = lambda name, t, s: helper.make_tensor_value_info(name, t, s)  # noqa: E731
    inputs = [value(i, TensorProto.FLOAT, [n]) for i in names]
    inputs += [value("step", TensorProto.INT64, [1]), value("lr", TensorProto.FLOAT, [1])]
    graph = helper.make_graph(nodes, "step", inputs, [value("n", TensorProto.INT64, [])])
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ort_ascend_ops", 1)]
    )


@pytest.mark.parametrize(
    "level", [ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_ALL]
)
def test_updates_in_place_like_torch_adamw_over_many_steps(level, rng):
    torch = pytest.importorskip("torch")
    n = 4099
    options = session_options()
    options.graph_optimization_level = level
    session = ort.InferenceSession(_adam_w_model(n).SerializeToString(), options)
    p0 = rng.standard_normal(n).astype(F32)
    values = {
        k: ort.OrtValue.ortvalue_from_numpy(v)
        for k, v in {"param": p0.copy(), "exp_avg": np.zeros(n, F32), "exp_avg_sq": np.zeros(n, F32)}.items()
    }
    where = {k: v.data_ptr() for k, v in values.items()}
    weight = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    optimizer = torch.optim.AdamW([weight], lr=3e-3, weight_decay=0.05)
    for step in range(1, 31):
        grad = rng.standard_normal(n).astype(F32)
        weight.grad = torch.from_numpy(grad.copy())
        optimizer.step()
        binding = session.io_binding()
        for name, value in values.items():
            binding.bind_ortvalue_input(name, value)
        binding.bind_cpu_input("grad", grad)
        binding.bind_cpu_input("step", np.array([step], np.int64))
        binding.bind_cpu_input("lr", np.array([3e-3], F32))
        binding.bind_output("n")
        session.run_with_iobinding(binding)
    assert {k: v.data_ptr() for k, v in values.items()} == where
    state = optimizer.state[weight]
    for name, expected in [
        ("param", weight),
        ("exp_avg", state["exp_avg"]),
        ("exp_avg_sq", state["exp_avg_sq"]),
    ]:
        expected = expected.detach().numpy()
        # torch's vectorized lerp rounds once through an FMA, we twice: float32 ulps of the
        # tensor's scale after 30 steps, never more.
        scale = float(np.max(np.abs(expected)))
        np.testing.assert_allclose(values[name].numpy(), expected, rtol=1e-5, atol=1e-6 * scale)


@pytest.mark.parametrize("engine", ["native", *(on(e) for e in ENGINES[1:2])])
@pytest.mark.parametrize(
    "change, word",
    [
        (lambda i: i | {"step": np.array([0], np.int64)}, "step"),
        (lambda i: i | {"lr": np.ones(2, F32)}, "lr"),
        (lambda i: i | {"grad": i["grad"][:-1]}, "grad"),
        (lambda i: i | {"exp_avg": i["exp_avg"][:-1]}, "exp_avg"),
    ],
)
def test_refuses_broken_rules(engine, change, word, rng):
    inputs = change(adam_w_inputs(rng, (6,), F32, F32))
    with pytest.raises(Exception, match=word):
        run(engine, "ApplyAdamW", inputs, {})


def adam_w_outputs(rng):
    """Every (TP, T) pair and both lerp forms, and streamed outputs, for the ISA comparison."""
    outputs = []
    for pair in ADAMW_PAIRS:
        for attrs in ({}, {"beta1": 0.3, "maximize": 1}):
            outputs += run("native", "ApplyAdamW", adam_w_inputs(rng, (3, 1111), *pair, step=7), attrs)
    return outputs + run("native", "ApplyAdamW", adam_w_inputs(rng, STREAMED, F32, F32, step=7), {})


def test_the_plain_loops_give_the_avx2_paths_bits(tmp_path):
    assert_plain_loops_give_avx2_bits(adam_w_outputs, tmp_path)
