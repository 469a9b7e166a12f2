"""The training artifacts and API (onnxruntime-training's interface): optimizer steps against
torch.optim, gradient accumulation, checkpoints (atomic, killed mid-save, resumed bit for bit),
export for inference, the errors users meet."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from memory import traced_peak
from model_oracles import relative_error
from onnx import TensorProto, helper, numpy_helper

from ort_ascend_ops.examples import hf_models as hf
from ort_ascend_ops.training import GradientError
from ort_ascend_ops.training.api import CheckpointState, LinearLRScheduler, Module, Optimizer
from ort_ascend_ops.training.artifacts import LossType, OptimType, generate_artifacts
from ort_ascend_ops.training.optim import SGD, AdamW

FIXTURES = Path(__file__).parents[1] / "models" / "hf"
STEPS = 20
OPTIMIZER_TOLERANCE = 1e-6
SHAPES = {"w": (6, 5), "b": (5,), "scale": (1,)}


def linear_gradient_model() -> onnx.ModelProto:
    """loss = sum_p sum(p * g_p): its gradient with respect to each parameter p is the input g_p,
    exactly, so the optimizer sees the gradients the test draws."""
    nodes, inputs, terms = [], [], []
    for name, shape in SHAPES.items():
        inputs.append(helper.make_tensor_value_info(f"g_{name}", TensorProto.FLOAT, list(shape)))
        nodes += [
            helper.make_node("Mul", [name, f"g_{name}"], [f"{name}_term"]),
            helper.make_node("ReduceSum", [f"{name}_term"], [f"{name}_sum"], keepdims=0),
        ]
        terms.append(f"{name}_sum")
    nodes.append(helper.make_node("Sum", terms, ["loss"]))
    rng = np.random.default_rng(1)
    weights = [
        numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in SHAPES.items()
    ]
    graph = helper.make_graph(
        nodes, "linear", inputs, [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], weights
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def linear_training(folder, **kwargs):
    """The artifacts of ``linear_gradient_model`` (AdamW unless ``kwargs`` say otherwise), and a
    state, module and optimizer over them."""
    paths = generate_artifacts(
        linear_gradient_model(), **({"optimizer": OptimType.AdamW} | kwargs), artifact_directory=folder
    )
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state)
    return paths, state, module, Optimizer(paths["optimizer"], module)


OPTIMIZERS = [
    ("adamw-defaults", AdamW(), "AdamW", {}),
    ("adamw-decay", AdamW(lr=3e-3, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1), "AdamW", {}),
    ("sgd-plain", SGD(lr=0.05), "SGD", {}),
    ("sgd-momentum", SGD(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01), "SGD", {}),
    ("sgd-nesterov", SGD(lr=0.05, momentum=0.9, nesterov=True), "SGD", {}),
]


def torch_optimizer(torch, name: str, options, parameters):
    fields = {k: v for k, v in vars(options).items()}
    return getattr(torch.optim, name)(parameters, **fields)


@pytest.mark.parametrize("case", OPTIMIZERS, ids=[c[0] for c in OPTIMIZERS])
def test_optimizer_steps_equal_torch_optim(case, tmp_path):
    torch = pytest.importorskip("torch")
    _, options, torch_name, _ = case
    paths = generate_artifacts(
        linear_gradient_model(), requires_grad=list(SHAPES), optimizer=options, artifact_directory=tmp_path
    )
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state, threads=1)
    optimizer = Optimizer(paths["optimizer"], module)
    assert optimizer.get_learning_rate() == pytest.approx(options.lr)
    params = {n: torch.tensor(state.parameters[n].data, requires_grad=True) for n in SHAPES}
    reference = torch_optimizer(torch, torch_name, options, list(params.values()))
    rng = np.random.default_rng(7)
    for _ in range(STEPS):
        grads = {n: rng.standard_normal(s).astype(np.float32) for n, s in SHAPES.items()}
        module(*(grads[n] for n in SHAPES))
        optimizer.step()
        module.lazy_reset_grad()
        for n, p in params.items():
            p.grad = torch.from_numpy(grads[n])
        reference.step()
    for n, p in params.items():
        assert relative_error(state.parameters[n].data, p.detach().numpy()) <= OPTIMIZER_TOLERANCE, n
    if isinstance(options, AdamW):
        ours = optimizer.states()
        for n, p in params.items():
            torch_state = reference.state[p]
            assert relative_error(ours["exp_avg"][n], torch_state["exp_avg"].numpy()) <= OPTIMIZER_TOLERANCE
            assert relative_error(ours["exp_avg_sq"][n], torch_state["exp_avg_sq"].numpy()) <= 1e-6
    assert optimizer.step_count == STEPS


def test_optim_type_defaults_are_torch_adamw(tmp_path):
    torch = pytest.importorskip("torch")
    reference = torch.optim.AdamW([torch.zeros(1, requires_grad=True)]).defaults
    ours = AdamW()
    assert (ours.lr, ours.betas, ours.eps, ours.weight_decay) == (
        reference["lr"],
        reference["betas"],
        reference["eps"],
        reference["weight_decay"],
    )
    paths = generate_artifacts(
        linear_gradient_model(), optimizer=OptimType.AdamW, artifact_directory=tmp_path
    )
    assert {p.name for p in paths.values()} == {
        "training_model.onnx",
        "eval_model.onnx",
        "optimizer_model.onnx",
        "checkpoint.safetensors",
    }


def test_default_parameters_leave_out_scalar_initializers(tmp_path):
    paths = generate_artifacts(linear_gradient_model(), artifact_directory=tmp_path)
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    assert sorted(state.parameters.keys()) == ["b", "w"]
    assert [name for name, _ in state.parameters] == list(state.parameters.keys())


def test_linear_lr_scheduler_follows_the_optimizer_step(tmp_path):
    torch = pytest.importorskip("torch")
    paths = generate_artifacts(linear_gradient_model(), optimizer=SGD(lr=0.1), artifact_directory=tmp_path)
    module = Module(paths["training"], CheckpointState.load_checkpoint(paths["checkpoint"]))
    optimizer = Optimizer(paths["optimizer"], module)
    scheduler = LinearLRScheduler(optimizer, warmup_step_count=3, total_step_count=10, initial_lr=0.1)
    # The same schedule through torch's LambdaLR (transformers' get_linear_schedule_with_warmup).
    p = torch.zeros(1, requires_grad=True)
    reference_optimizer = torch.optim.SGD([p], lr=0.1)
    reference = torch.optim.lr_scheduler.LambdaLR(
        reference_optimizer, lambda s: s / 3 if s < 3 else max(0.0, (10 - s) / 7)
    )
    rates = []
    for _ in range(12):
        rates.append((optimizer.get_learning_rate(), reference_optimizer.param_groups[0]["lr"]))
        module(*(np.zeros(s, np.float32) for s in SHAPES.values()))
        optimizer.step()
        scheduler.step()
        reference_optimizer.step()
        reference.step()
    np.testing.assert_allclose(*zip(*rates, strict=True), rtol=1e-12, atol=1e-15)


@pytest.fixture(scope="module")
def mse_artifacts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mse")
    model = onnx.load(FIXTURES / "llama_dynamic_opset23_mse.onnx")
    return generate_artifacts(model, optimizer=SGD(lr=0.1), artifact_directory=folder)


def test_gradient_accumulation_equals_the_concatenated_batch(mse_artifacts):
    """Four micro-batches of one sequence accumulate to four times the gradient of their mean
    loss as one batch of four (MSE over equal-sized parts)."""
    data = hf.batch("mse", 4)
    results = {}
    for mode in ("micro", "whole"):
        state = CheckpointState.load_checkpoint(mse_artifacts["checkpoint"])
        module = Module(mse_artifacts["training"], state, threads=1)
        optimizer = Optimizer(mse_artifacts["optimizer"], module)
        if mode == "micro":
            for i in range(4):
                module(data["input_ids"][i : i + 1], data["target"][i : i + 1])
            optimizer.set_learning_rate(0.1 / 4)
        else:
            module(data["input_ids"], data["target"])
        grads = {n: p.grad for n, p in state.parameters.items()}
        optimizer.step()
        results[mode] = grads, {n: p.data for n, p in state.parameters.items()}
    for name, grad in results["whole"][0].items():
        assert relative_error(results["micro"][0][name] / 4, grad) <= 1e-5, name
        assert relative_error(results["micro"][1][name], results["whole"][1][name]) <= 1e-6, name


def test_lazy_reset_grad_overwrites_and_a_new_module_starts_fresh(mse_artifacts):
    data = hf.batch("mse", 1)
    state = CheckpointState.load_checkpoint(mse_artifacts["checkpoint"])
    module = Module(mse_artifacts["training"], state, threads=1)
    module(data["input_ids"], data["target"])
    once = {n: p.grad for n, p in state.parameters.items()}
    module(data["input_ids"], data["target"])
    for n, p in state.parameters.items():
        np.testing.assert_allclose(p.grad, 2 * once[n], rtol=1e-6, atol=1e-9)
    module.lazy_reset_grad()
    module(data["input_ids"], data["target"])
    for n, p in state.parameters.items():
        np.testing.assert_array_equal(p.grad, once[n])


def test_accumulation_writes_each_gradient_in_its_own_buffer_and_reads_are_copies(mse_artifacts):
    data = hf.batch("mse", 1)
    state = CheckpointState.load_checkpoint(mse_artifacts["checkpoint"])
    module = Module(mse_artifacts["training"], state, threads=1)
    optimizer = Optimizer(mse_artifacts["optimizer"], module)
    module(data["input_ids"], data["target"])
    buffers = {n: p.grad_value.data_ptr() for n, p in state.parameters.items() if p.requires_grad}
    grads, values = (
        {n: p.grad for n, p in state.parameters.items()},
        {n: p.data for n, p in state.parameters.items()},
    )
    module(data["input_ids"], data["target"])
    optimizer.step()
    assert {n: state.parameters[n].grad_value.data_ptr() for n in buffers} == buffers
    for n, p in state.parameters.items():
        if p.grad is not None:
            np.testing.assert_allclose(p.grad, 2 * grads[n], rtol=1e-6, atol=1e-9)
            assert not np.array_equal(p.data, values[n]), n  # the arrays read before kept their values


def test_native_and_portable_gradients_agree(mse_artifacts):
    data = hf.batch("mse", 2)
    grads = {}
    for native in (True, False):
        state = CheckpointState.load_checkpoint(mse_artifacts["checkpoint"])
        Module(mse_artifacts["training"], state, native=native)(data["input_ids"], data["target"])
        grads[native] = {n: p.grad for n, p in state.parameters.items()}
    for name in grads[True]:
        assert relative_error(grads[True][name], grads[False][name]) <= 1e-5, name


def test_export_for_inferencing_equals_the_training_forward(tmp_path):
    model = onnx.load(FIXTURES / "llama_dynamic_opset23_ce.onnx")
    paths = generate_artifacts(
        model, optimizer=OptimType.AdamW, artifact_directory=tmp_path, additional_output_names=["logits"]
    )
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state, paths["eval"], threads=1)
    optimizer = Optimizer(paths["optimizer"], module)
    data = hf.batch("ce", 2)
    for _ in range(3):  # trained weights, not the export's
        module(data["input_ids"], data["labels"])
        optimizer.step()
        module.lazy_reset_grad()
    loss, logits = module(data["input_ids"], data["labels"])
    module.export_model_for_inferencing(tmp_path / "inference.onnx", ["logits"])
    inference = onnx.load(tmp_path / "inference.onnx")
    assert [i.name for i in inference.graph.input] == ["input_ids"]
    from ort_ascend_ops import make_session

    (out,) = make_session(inference, threads=1).run({"input_ids": data["input_ids"]})
    assert relative_error(out, logits) <= 1e-6
    module.eval()
    assert relative_error(module(data["input_ids"], data["labels"])[0], loss) <= 1e-6


@pytest.mark.parametrize("loss_type", [LossType.MSELoss, LossType.CrossEntropyLoss])
def test_loss_types_equal_their_formula(loss_type, tmp_path):
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((4, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "weight"], ["scores"])],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(weight, "weight")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    paths = generate_artifacts(model, loss=loss_type, optimizer=OptimType.SGD, artifact_directory=tmp_path)
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state, paths["eval"], threads=1)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    scores = x.astype(np.float64) @ weight
    if loss_type is LossType.MSELoss:
        target = rng.standard_normal((5, 3)).astype(np.float32)
        expected = np.mean((scores - target) ** 2)
        grad = x.T.astype(np.float64) @ (2 * (scores - target) / scores.size)
    else:
        target = rng.integers(0, 3, 5).astype(np.int64)
        shifted = scores - scores.max(axis=1, keepdims=True)
        p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
        expected = -np.mean(np.log(p[np.arange(5), target]))
        grad = x.T.astype(np.float64) @ ((p - np.eye(3)[target]) / 5)
    assert relative_error(module(x, target), expected) <= 1e-6
    assert relative_error(state.parameters["weight"].grad, grad) <= 1e-5


def test_frozen_parameters_stay_in_the_checkpoint_without_gradients(tmp_path):
    paths = generate_artifacts(
        linear_gradient_model(),
        requires_grad=["w"],
        frozen_params=["b"],
        optimizer=OptimType.AdamW,
        artifact_directory=tmp_path,
    )
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    assert {n: p.requires_grad for n, p in state.parameters.items()} == {"w": True, "b": False}
    module = Module(paths["training"], state)
    before = state.parameters["b"].data
    optimizer = Optimizer(paths["optimizer"], module)
    module(*(np.ones(s, np.float32) for s in SHAPES.values()))
    optimizer.step()
    np.testing.assert_array_equal(state.parameters["b"].data, before)
    assert state.parameters["b"].grad is None
    assert state.parameters["w"].grad is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"requires_grad": ["nope"]}, r"\['nope'\] are not floating-point initializers"),
        (
            {"requires_grad": ["w"], "frozen_params": ["w"]},
            r"\['w'\] are both in requires_grad and in frozen_params",
        ),
        ({"requires_grad": [], "optimizer": OptimType.AdamW}, "no parameter requires a gradient"),
        ({"loss_output_name": "missing"}, "'missing' is not an output of the model"),
        ({"additional_output_names": ["ghost"]}, r"no values \['ghost'\]"),
    ],
)
def test_generate_artifacts_errors_name_the_value(kwargs, message, tmp_path):
    with pytest.raises(GradientError, match=message):
        generate_artifacts(linear_gradient_model(), artifact_directory=tmp_path, **kwargs)


def test_api_errors(tmp_path):
    paths, state, module, optimizer = linear_training(tmp_path)
    with pytest.raises(RuntimeError, match="no gradients yet: run the module before the optimizer"):
        optimizer.step()
    with pytest.raises(ValueError, match=r"takes 3 inputs \['g_w', 'g_b', 'g_scale'\], got 1"):
        module(np.ones((6, 5), np.float32))
    with pytest.raises(ValueError, match=r"parameter 'w' is float32\[6, 5\]; got float32\[5, 6\]"):
        state.parameters["w"].data = np.ones((5, 6), np.float32)
    with pytest.raises(TypeError, match="property 'epoch': values are int, float or str, not list"):
        state.properties["epoch"] = [1]
    with pytest.raises(RuntimeError, match="no eval model"):
        Module(paths["training"], state).eval()
    (tmp_path / "junk.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(ValueError, match="junk.safetensors: not a readable safetensors file"):
        CheckpointState.load_checkpoint(tmp_path / "junk.safetensors")
    with pytest.raises(ValueError, match="not an ort_ascend_ops checkpoint"):
        import safetensors.numpy

        safetensors.numpy.save_file({"w": np.ones(2, np.float32)}, tmp_path / "plain.safetensors")
        CheckpointState.load_checkpoint(tmp_path / "plain.safetensors")


def test_checkpoint_round_trip_keeps_everything(tmp_path):
    paths, state, module, optimizer = linear_training(tmp_path)
    rng = np.random.default_rng(0)
    module(*(rng.standard_normal(s).astype(np.float32) for s in SHAPES.values()))
    optimizer.step()
    optimizer.set_learning_rate(0.25)
    state.properties.update(epoch=3, fraction=0.1 + 0.2, name="run-a")
    CheckpointState.save_checkpoint(state, tmp_path / "full.safetensors", include_optimizer_state=True)
    CheckpointState.save_checkpoint(state, tmp_path / "weights.safetensors")
    loaded = CheckpointState.load_checkpoint(tmp_path / "full.safetensors")
    assert dict(loaded.properties) == {"epoch": 3, "fraction": 0.1 + 0.2, "name": "run-a"}
    for name, p in state.parameters.items():
        np.testing.assert_array_equal(loaded.parameters[name].data, p.data)
    resumed = Optimizer(paths["optimizer"], Module(paths["training"], loaded))
    assert (resumed.step_count, resumed.get_learning_rate()) == (1, 0.25)
    for s, values in optimizer.states().items():
        for name, value in values.items():
            np.testing.assert_array_equal(resumed.states()[s][name], value)
    weights_only = CheckpointState.load_checkpoint(tmp_path / "weights.safetensors")
    fresh = Optimizer(paths["optimizer"], Module(paths["training"], weights_only))
    assert (fresh.step_count, fresh.get_learning_rate()) == (0, AdamW().lr)
    assert all(not np.any(v) for values in fresh.states().values() for v in values.values())
    # A torch user reads the parameters by name.
    import safetensors.numpy

    assert set(safetensors.numpy.load_file(tmp_path / "weights.safetensors")) == {"w", "b"}


_SAVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from ort_ascend_ops.training.checkpoint import Contents, write
    path = sys.argv[1]
    print("ready", flush=True)
    for version in range(1, 10**9):
        big = np.full(2_000_000, version, np.float32)  # 8 MB: the kill lands mid-write often
        write(path, Contents({"w": big}, {"w": True}, {"version": version}))
    """
)


def test_a_process_killed_while_saving_leaves_a_loadable_checkpoint(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    rng = np.random.default_rng()
    for _ in range(8):
        child = subprocess.Popen([sys.executable, "-c", _SAVER, str(path)], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(float(rng.uniform(0.05, 0.6)))
        child.send_signal(signal.SIGKILL)
        child.wait()
        if not path.exists():
            continue
        state = CheckpointState.load_checkpoint(path)
        version = state.properties["version"]
        np.testing.assert_array_equal(state.parameters["w"].data, np.full(2_000_000, version, np.float32))
    assert path.exists(), "no save finished in any run"
    leftovers = [p.name for p in tmp_path.iterdir() if p != path]
    assert len(leftovers) <= 1  # at most the killed writer's temporary file
    CheckpointState.save_checkpoint(CheckpointState.load_checkpoint(path), path)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    os.sync()


@pytest.mark.parametrize(
    "metadata",
    [
        {"format": "ort_ascend_ops.checkpoint", "version": "1"},
        {"format": "ort_ascend_ops.checkpoint", "version": "1", "requires_grad": "[1]", "properties": "{}"},
        {
            "format": "ort_ascend_ops.checkpoint",
            "version": "1",
            "requires_grad": '{"w": true}',
            "properties": "{",
        },
        {
            "format": "ort_ascend_ops.checkpoint",
            "version": "1",
            "requires_grad": '{"w": true}',
            "properties": '{"p": []}',
        },
        {
            "format": "ort_ascend_ops.checkpoint",
            "version": "1",
            "requires_grad": '{"w": true}',
            "properties": "{}",
            "optimizer": '{"step": "x"}',
        },
    ],
    ids=["no-flags", "flags-not-a-dict", "bad-json", "bad-property", "bad-optimizer"],
)
def test_malformed_checkpoint_metadata_is_a_value_error(metadata, tmp_path):
    import safetensors.numpy

    safetensors.numpy.save_file(
        {"w": np.ones(2, np.float32)}, tmp_path / "bad.safetensors", metadata=metadata
    )
    with pytest.raises(ValueError, match="bad.safetensors: malformed checkpoint metadata"):
        CheckpointState.load_checkpoint(tmp_path / "bad.safetensors")


def test_a_truncated_checkpoint_is_a_value_error(tmp_path):
    paths = generate_artifacts(linear_gradient_model(), artifact_directory=tmp_path)
    data = paths["checkpoint"].read_bytes()
    for size in (0, 7, 100, len(data) - 1):
        (tmp_path / "cut.safetensors").write_bytes(data[:size])
        with pytest.raises(ValueError, match="cut.safetensors: not a readable safetensors file"):
            CheckpointState.load_checkpoint(tmp_path / "cut.safetensors")


@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
def test_session_options_of_the_users_keep_the_library(native, tmp_path):
    # A profiled step: the given options get the library (unless native=False), so our nodes run
    # as themselves, not as their inlined reference functions' standard ops.
    import onnxruntime as ort

    from ort_ascend_ops.examples import byte_llama

    paths = generate_artifacts(
        onnx.load(byte_llama.model_path()), loss=None, optimizer=AdamW(), artifact_directory=tmp_path
    )
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "profile")
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state, native=native, session_options=options)
    ids = np.random.default_rng().integers(0, 256, (2, 24), dtype=np.int64)
    module(ids, ids)
    profile = json.load(open(module.training_session.end_profiling()))
    ran = {e["args"]["op_name"] for e in profile if e.get("cat") == "Node" and "op_name" in e.get("args", {})}
    ours = {"RmsNorm", "RmsNormGrad", "FlashAttentionScore", "FlashAttentionScoreGrad"}
    assert ours <= ran if native else not ours & ran, sorted(ran)


def test_options_holding_the_library_by_hand_get_a_clear_error():
    import onnxruntime as ort

    from ort_ascend_ops import get_library_path, make_op_model, make_session

    model = make_op_model("RmsNorm", {"x": (np.float32, [2, 4]), "gamma": (np.float32, [4])})

    def by_hand():
        options = ort.SessionOptions()
        options.register_custom_ops_library(get_library_path())
        return options

    with pytest.raises(ValueError, match="register the 'ort_ascend_ops' library twice.*native=False"):
        make_session(model, options=by_hand())
    make_session(model, options=by_hand(), native=False)  # the hand-registered library runs it


@pytest.mark.parametrize(
    "max_norm, norm_type",
    [(0.01, 2.0), (1e6, 2.0), (0.001, float("inf")), (0.05, 1.5)],
    ids=["clipped", "under-the-limit", "inf", "p1.5"],
)
def test_clip_grad_norm_equals_torch(max_norm, norm_type, mse_artifacts):
    torch = pytest.importorskip("torch")
    from ort_ascend_ops.training.api import clip_grad_norm_

    data = hf.batch("mse", 2)
    state = CheckpointState.load_checkpoint(mse_artifacts["checkpoint"])
    module = Module(mse_artifacts["training"], state, threads=1)
    module(data["input_ids"], data["target"])
    grads = {n: p.grad for n, p in state.parameters.items() if p.grad is not None}
    leaves = []
    for grad in grads.values():
        leaf = torch.zeros(grad.shape, requires_grad=True)
        leaf.grad = torch.from_numpy(grad.copy())
        leaves.append(leaf)
    expected = torch.nn.utils.clip_grad_norm_(leaves, max_norm, norm_type=norm_type)
    total = clip_grad_norm_(module, max_norm, norm_type=norm_type)
    assert total == pytest.approx(float(expected), rel=1e-5)
    for (name, grad), leaf in zip(grads.items(), leaves, strict=True):
        clipped = state.parameters[name].grad
        assert relative_error(clipped, leaf.grad.numpy()) <= 1e-5, name
        if max_norm > 1e5:
            np.testing.assert_array_equal(clipped, grad)  # a coefficient clamped at 1


def test_clip_grad_norm_of_a_non_finite_gradient_is_torchs(mse_artifacts):
    torch = pytest.importorskip("torch")
    from ort_ascend_ops.training.api import clip_grad_norm_

    data = hf.batch("mse", 1)
    state = CheckpointState.load_checkpoint(mse_artifacts["checkpoint"])
    module = Module(mse_artifacts["training"], state, threads=1)
    module(data["input_ids"], data["target"])
    name = next(n for n, p in state.parameters.items() if p.grad is not None)
    poisoned = state.parameters[name].grad
    poisoned.flat[0] = np.inf
    state.parameters[name].grad = poisoned
    leaf = torch.zeros(poisoned.shape, requires_grad=True)
    leaf.grad = torch.from_numpy(poisoned.copy())
    others = [p.grad for n, p in state.parameters.items() if p.grad is not None and n != name]
    leaves = [leaf] + [torch.zeros(g.shape, requires_grad=True) for g in others]
    for extra, g in zip(leaves[1:], others, strict=True):
        extra.grad = torch.from_numpy(g.copy())
    expected = torch.nn.utils.clip_grad_norm_(leaves, 1.0)  # error_if_nonfinite=False: inf, grads times 0
    assert clip_grad_norm_(module, 1.0) == float(expected) == float("inf")
    np.testing.assert_array_equal(state.parameters[name].grad, leaf.grad.numpy())  # NaN where inf, else 0


def test_clip_grad_norm_errors_name_the_rule(mse_artifacts):
    from ort_ascend_ops.training.api import clip_grad_norm_

    state = CheckpointState.load_checkpoint(mse_artifacts["checkpoint"])
    module = Module(mse_artifacts["training"], state, threads=1)
    with pytest.raises(RuntimeError, match="clip_grad_norm_: no gradients yet"):
        clip_grad_norm_(module, 1.0)
    with pytest.raises(ValueError, match="clip_grad_norm_: norm_type must be positive"):
        clip_grad_norm_(module, 1.0, norm_type=0)


_SAVE_RSS = """
import resource, sys
import numpy as np
from ort_ascend_ops.training.checkpoint import Contents, write
n = 64 * 2**20  # 256 MB of float32 per tensor
arrays = [np.full(n, i + 1.0, np.float32) for i in range(3)]
states = {"exp_avg": {"w": arrays[1]}, "exp_avg_sq": {"w": arrays[2]}}
contents = Contents({"w": arrays[0]}, {"w": True}, optimizer={"step": 1, "learning_rate": 0.1}, optimizer_states=states)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
write(sys.argv[1], contents)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def test_a_checkpoint_is_written_tensor_by_tensor_without_copies(tmp_path):
    """Saving 768 MB of tensors (a parameter and AdamW's two states) grows the process's peak RSS
    by under a tenth of that, in a child process; safetensors' own ``save`` built the whole file
    in memory first (+1.5 GB here). The file reads back through safetensors."""
    import safetensors.numpy

    path = tmp_path / "c.safetensors"
    result = subprocess.run(
        [sys.executable, "-c", _SAVE_RSS, str(path)], capture_output=True, text=True, check=True
    )
    grown = int(result.stdout)
    assert grown < 0.1 * 3 * 256 * 2**20, f"peak RSS grew {grown / 2**20:.0f} MB"
    tensors = safetensors.numpy.load_file(path)
    assert sorted(tensors) == ["optimizer/exp_avg/w", "optimizer/exp_avg_sq/w", "w"]
    assert tensors["optimizer/exp_avg_sq/w"][-1] == 3.0 and tensors["w"][0] == 1.0


# The API's refusals where torch refuses, in a child process as a user's script meets them: the
# cases one after another on one Module (a refusal leaves it usable: a valid step follows each),
# each case's error printed after it.
_REFUSALS = """
import sys, tempfile
import numpy as np
from ort_ascend_ops.examples import byte_llama
from ort_ascend_ops.training.api import CheckpointState, Module, Optimizer
from ort_ascend_ops.training.artifacts import OptimType, generate_artifacts

paths = generate_artifacts(byte_llama.model_path(), optimizer=OptimType.AdamW, artifact_directory=tempfile.mkdtemp())
engine, threads, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
state = CheckpointState.load_checkpoint(paths["checkpoint"])
module = Module(paths["training"], state, paths["eval"], threads=threads, native=engine == "native")
optimizer = Optimizer(paths["optimizer"], module)
valid = np.random.default_rng(0).integers(0, 256, (2, 16))
for case in cases:
    ids, labels = valid.copy(), valid.copy()
    try:
        if case.startswith("lr"):
            optimizer.set_learning_rate(float(case.split()[1]))
        else:
            where, value = case.split()
            (ids if where == "id" else labels)[1, 5] = int(value)
            module(ids, labels)
        print(case, "| accepted")
    except Exception as error:
        print(case, "|", type(error).__name__, str(error).replace(chr(10), " "))
    assert np.isfinite(module(valid, valid)), case
"""
REFUSALS = {
    "lr nan": "set_learning_rate: the learning rate must be finite and >= 0, got nan",
    "lr inf": "set_learning_rate: the learning rate must be finite and >= 0, got inf",
    "lr -0.1": "set_learning_rate: the learning rate must be finite and >= 0, got -0.1",
    "id -1": "input 'input_ids' must hold token ids in [0, 256)",
    "id 256": "input 'input_ids' must hold token ids in [0, 256)",
    "label -5": "must lie in [0, classes) or be -100 (ignored)",
    "label 256": "must lie in [0, classes) or be -100 (ignored)",
}


@pytest.mark.parametrize("engine, threads", [("native", 1), ("native", 4), ("portable", 2)])
def test_what_torch_refuses_is_refused_naming_the_rule(engine, threads):
    """torch.optim refuses such a rate, torch's embedding a token id outside its rows (ONNX's
    Gather takes -1 as the last row) and cross_entropy a label outside the classes: natively and
    on the portable path, at 1, 2 and 4 threads; an error, never a crash."""
    command = [sys.executable, "-c", _REFUSALS, engine, str(threads), *REFUSALS]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    said = dict(line.split(" | ", 1) for line in result.stdout.splitlines() if " | " in line)
    assert sorted(said) == sorted(REFUSALS), result.stdout
    for case, message in REFUSALS.items():
        assert message in said[case] and not said[case].startswith("accepted"), (case, said[case])


def test_labels_of_the_ignore_index_train_as_torch_ignores_them(tmp_path):
    paths = generate_artifacts(
        onnx.load(FIXTURES / "llama_dynamic_opset23_ce.onnx"), artifact_directory=tmp_path
    )
    module = Module(paths["training"], CheckpointState.load_checkpoint(paths["checkpoint"]), threads=1)
    data = hf.batch("ce", 2)
    labels = data["labels"].copy()
    labels[:, 3:] = -100
    assert np.isfinite(module(data["input_ids"], labels))


def write_checkpoint_of_parts(path, parts: int, size: int) -> None:
    """A checkpoint of ``parts`` float32 parameters of ``size`` elements and their AdamW states."""
    from ort_ascend_ops.training.checkpoint import Contents, write

    arrays = {f"w{i}": np.full(size, i + 1.0, np.float32) for i in range(parts)}
    states = {s: {n: a * k for n, a in arrays.items()} for k, s in ((2, "exp_avg"), (3, "exp_avg_sq"))}
    write(
        path,
        Contents(
            arrays,
            dict.fromkeys(arrays, True),
            optimizer={"step": 1, "learning_rate": 0.1},
            optimizer_states=states,
        ),
    )


def test_a_checkpoint_is_loaded_tensor_by_tensor(tmp_path):
    """Loading 24 tensors of 1 MB (parameters and AdamW states) holds about one of them in NumPy
    at a time, each moved into ONNX Runtime's memory before the next is read; the values are the
    file's."""
    path = tmp_path / "c.safetensors"
    write_checkpoint_of_parts(path, 8, 2**18)
    peak, state = traced_peak(lambda: CheckpointState.load_checkpoint(path))
    assert peak < 2 * 2**20 + 2**18, f"{peak / 2**20:.1f} MB held at once of 24 MB"
    for i in range(8):
        assert state.parameters[f"w{i}"].data[-1] == i + 1.0
    assert state.optimizer_state.values["exp_avg_sq"]["w7"].numpy()[0] == 24.0
