"""generate_artifacts as onnxruntime-training 1.19 has it: its arguments (those whose feature we
lack refused by name), models of opsets below 18, models without a trainable parameter, eval models
with training mode off, its four LossTypes, loss_input_names, string inputs and BatchNormalization
models. The artifacts run on plain ONNX Runtime sessions, against torch float64 and NumPy oracles
on random inputs."""

import inspect

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

from ort_ascend_ops.training.api import CheckpointState, Module
from ort_ascend_ops.training.artifacts import LossType, OptimType, generate_artifacts
from ort_ascend_ops.training.checkpoint import read

N, IN, OUT = 6, 4, 3


def _weights(rng, prefix="fc", rows=OUT, columns=IN, scale=1.0):
    return {
        f"{prefix}.weight": (scale * rng.standard_normal((rows, columns))).astype(np.float32),
        f"{prefix}.bias": rng.standard_normal(rows).astype(np.float32),
    }


def _model(nodes, inputs, outputs, weights, opset=18):
    graph = helper.make_graph(
        nodes, "model", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in weights.items()]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _input(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def _linear(x="x", out="scores", prefix="fc"):
    return helper.make_node("Gemm", [x, f"{prefix}.weight", f"{prefix}.bias"], [out], transB=1)


def _linear_model(weights, opset=18):
    return _model([_linear()], [_input("x", ["N", IN])], [_input("scores", ["N", OUT])], weights, opset)


def _run(path, feeds, options=None):
    """The model's outputs by name, on a session of ONNX Runtime's own."""
    session = ort.InferenceSession(str(path), options)
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True))


def _parameters(paths):
    return read(paths["checkpoint"]).parameters


def _torch_linear(weights, x):
    w, b = (
        torch.tensor(weights[n], dtype=torch.float64, requires_grad=True) for n in ("fc.weight", "fc.bias")
    )
    return w, b, torch.tensor(x, dtype=torch.float64) @ w.T + b


def _close(actual, expected, tolerance=1e-5):
    expected = np.asarray(expected, np.float64)
    # The floor: a gradient that is 0 (a bias before a batch norm's) comes out as rounding.
    assert np.linalg.norm(actual - expected) <= tolerance * max(np.linalg.norm(expected), 1e-3)


# onnxruntime-training 1.19.2's generate_artifacts, parameter by parameter, with its defaults.
ORT_1_19_PARAMETERS = {
    "model": inspect.Parameter.empty,
    "requires_grad": None,
    "frozen_params": None,
    "loss": None,
    "optimizer": None,
    "artifact_directory": None,
    "prefix": "",
    "ort_format": False,
    "custom_op_library": None,
    "additional_output_names": None,
    "nominal_checkpoint": False,
    "loss_input_names": None,
}


def test_signature_takes_onnxruntime_training_arguments_in_order(tmp_path, rng):
    parameters = list(inspect.signature(generate_artifacts).parameters.values())[: len(ORT_1_19_PARAMETERS)]
    assert {p.name: p.default for p in parameters} == ORT_1_19_PARAMETERS
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters)
    assert {t.name: t.value for t in LossType} == {
        "MSELoss": 1,
        "CrossEntropyLoss": 2,
        "BCEWithLogitsLoss": 3,
        "L1Loss": 4,
    }
    assert {t.name: t.value for t in OptimType} == {"AdamW": 1, "SGD": 2}
    # Their defaults given positionally, as a ported call may: the artifacts are written.
    model = _linear_model(_weights(rng))
    args = (None, None, LossType(1), OptimType(2), tmp_path, "p_", False, None, None, False, None)
    paths = generate_artifacts(model, *args)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths.values())
    assert all(p.name.startswith("p_") for p in paths.values())


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("ort_format", True), ("nominal_checkpoint", True), ("custom_op_library", "libcustom_op_library.so")],
)
def test_unsupported_keywords_are_refused_by_name(keyword, value, tmp_path, rng):
    with pytest.raises(
        ValueError, match=rf"generate_artifacts: {keyword}.* is not supported.*Pass {keyword}="
    ):
        generate_artifacts(
            _linear_model(_weights(rng)),
            loss=LossType.MSELoss,
            artifact_directory=tmp_path,
            **{keyword: value},
        )
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("loss", ["CrossEntropyLoss", 2, object()], ids=["str", "int", "block"])
def test_a_loss_other_than_a_loss_type_is_refused(loss, tmp_path, rng):
    with pytest.raises(
        TypeError, match=r"loss must be a LossType \(MSELoss, .*L1Loss\) or None.*onnxblock.*loss=None"
    ):
        generate_artifacts(_linear_model(_weights(rng)), loss=loss, artifact_directory=tmp_path)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "keyword", ["requires_grad", "frozen_params", "additional_output_names", "loss_input_names"]
)
def test_a_string_for_a_list_of_names_is_refused(keyword, tmp_path, rng):
    with pytest.raises(TypeError, match=f"{keyword} is a list of names, got the string 'scores'"):
        generate_artifacts(_linear_model(_weights(rng)), artifact_directory=tmp_path, **{keyword: "scores"})


def test_an_optimizer_other_than_ours_is_refused(tmp_path, rng):
    class AdamW:  # onnxblock.optim.AdamW's stand-in
        pass

    with pytest.raises(TypeError, match=r"optimizer must be an OptimType.*got .*AdamW\. .*onnxblock"):
        generate_artifacts(_linear_model(_weights(rng)), optimizer=AdamW(), artifact_directory=tmp_path)


def _mlp_at_opset_12(rng):
    """Gemm, Relu, then Unsqueeze and ReduceMean whose axes are attributes (inputs from opsets 13
    and 18 on), a second Gemm: scores = fc2(relu(fc1(x)))."""
    weights = _weights(rng, "fc1", 5, IN) | _weights(rng, "fc2", OUT, 5)
    nodes = [
        _linear("x", "h", "fc1"),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Unsqueeze", ["r"], ["u"], axes=[1]),
        helper.make_node("ReduceMean", ["u"], ["m"], axes=[1], keepdims=0),
        _linear("m", "scores", "fc2"),
    ]
    return _model(nodes, [_input("x", ["N", IN])], [_input("scores", ["N", OUT])], weights, opset=12), weights


def test_older_opsets_are_converted(tmp_path, rng):
    model, weights = _mlp_at_opset_12(rng)
    paths = generate_artifacts(
        model, loss=LossType.MSELoss, optimizer=OptimType.SGD, artifact_directory=tmp_path
    )
    for key in ("training", "eval", "optimizer"):
        assert next(o.version for o in onnx.load(paths[key]).opset_import if o.domain == "") >= 18
    x, target = (
        rng.standard_normal((N, IN)).astype(np.float32),
        rng.standard_normal((N, OUT)).astype(np.float32),
    )
    results = _run(paths["training"], {"x": x, "target": target} | _parameters(paths))
    tensors = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True) for n, a in weights.items()}
    h = torch.relu(torch.tensor(x, dtype=torch.float64) @ tensors["fc1.weight"].T + tensors["fc1.bias"])
    loss = F.mse_loss(
        h @ tensors["fc2.weight"].T + tensors["fc2.bias"], torch.tensor(target, dtype=torch.float64)
    )
    loss.backward()
    _close(results["loss"], loss.item())
    for name, tensor in tensors.items():
        _close(results[f"{name}_grad"], tensor.grad)


def test_an_opset_the_converter_cannot_convert_is_named(tmp_path, rng):
    weights = _weights(rng)
    nodes = [_linear(out="h"), helper.make_node("NoSuchOp", ["h"], ["scores"])]
    model = _model(nodes, [_input("x", ["N", IN])], [_input("scores", ["N", OUT])], weights, opset=14)
    with pytest.raises(
        ValueError, match="imports opset 14 of the default domain.*could not bring it to opset 18"
    ):
        generate_artifacts(model, loss=LossType.MSELoss, artifact_directory=tmp_path)


def test_the_checkpoint_loads_by_onnxruntime_trainings_name(tmp_path, rng):
    weights = _weights(rng)
    paths = generate_artifacts(_linear_model(weights), loss=LossType.MSELoss, artifact_directory=tmp_path)
    assert paths["checkpoint"].name == "checkpoint.safetensors"
    state = CheckpointState.load_checkpoint(tmp_path / "checkpoint")  # as ported code loads it
    for name, value in weights.items():
        np.testing.assert_array_equal(state.parameters[name].data, value)


def _dropout(x, out, ratio):
    """Dropout of a constant ratio in training mode, as torch exports a module in train()."""
    ratio_value, training = (
        numpy_helper.from_array(np.array(ratio, np.float32)),
        numpy_helper.from_array(np.array(True)),
    )
    return [
        helper.make_node("Constant", [], [f"{out}/ratio"], value=ratio_value),
        helper.make_node("Constant", [], [f"{out}/training"], value=training),
        helper.make_node("Dropout", [x, f"{out}/ratio", f"{out}/training"], [out, f"{out}/mask"]),
    ]


def test_without_trainable_parameters_the_training_model_has_the_loss_alone(tmp_path, rng):
    # A frozen weight, then a dropout: no parameter trains.
    weights = _weights(rng)
    nodes = [_linear(out="h"), *_dropout("h", "scores", 0.5)]
    model = _model(nodes, [_input("x", ["N", IN])], [_input("scores", ["N", OUT])], weights, opset=14)
    frozen = list(weights)
    with pytest.raises(ValueError, match="no parameter requires a gradient.*pass optimizer=None"):
        generate_artifacts(model, [], frozen, LossType.CrossEntropyLoss, OptimType.AdamW, tmp_path)
    paths = generate_artifacts(model, [], frozen, LossType.CrossEntropyLoss, artifact_directory=tmp_path)
    assert set(paths) == {"training", "eval", "checkpoint"}
    assert [o.name for o in onnx.load(paths["training"]).graph.output] == ["loss"]
    checkpoint = read(paths["checkpoint"])
    assert checkpoint.requires_grad == dict.fromkeys(weights, False)
    x, labels = rng.standard_normal((N, IN)).astype(np.float32), rng.integers(0, OUT, N)
    feeds = {"x": x, "labels": labels} | checkpoint.parameters
    assert np.isfinite(_run(paths["training"], feeds)["loss"])
    _, _, scores = _torch_linear(weights, x)
    _close(_run(paths["eval"], feeds)["loss"], F.cross_entropy(scores, torch.tensor(labels)).item())


def _batch_norm_model(rng, dropout=None):
    """fc, then BatchNormalization in training mode (its running statistics among the outputs, as
    torch exports a module in train()), then a dropout, at opset 14."""
    weights = _weights(rng) | {
        "bn.weight": rng.uniform(0.5, 1.5, OUT).astype(np.float32),
        "bn.bias": rng.standard_normal(OUT).astype(np.float32),
    }
    statistics = {
        "bn.running_mean": rng.standard_normal(OUT).astype(np.float32),
        "bn.running_var": rng.uniform(0.5, 2.0, OUT).astype(np.float32),
    }
    norm_out = "normalized" if dropout is not None else "scores"
    nodes = [
        _linear(out="h"),
        helper.make_node(
            "BatchNormalization",
            ["h", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
            [norm_out, "bn/mean_out", "bn/var_out"],
            epsilon=1e-5,
            momentum=0.9,
            training_mode=1,
        ),
        *(_dropout(norm_out, "scores", dropout) if dropout is not None else []),
    ]
    model = _model(
        nodes, [_input("x", ["N", IN])], [_input("scores", ["N", OUT])], weights | statistics, opset=14
    )
    return model, weights, statistics


def _torch_batch_norm(weights, statistics, x, training):
    w, b, h = _torch_linear(weights, x)
    scale, shift = (
        torch.tensor(weights[n], dtype=torch.float64, requires_grad=True) for n in ("bn.weight", "bn.bias")
    )
    mean, var = (
        torch.tensor(statistics[n], dtype=torch.float64) for n in ("bn.running_mean", "bn.running_var")
    )
    scores = F.batch_norm(h, mean, var, scale, shift, training=training, eps=1e-5)
    return {"fc.weight": w, "fc.bias": b, "bn.weight": scale, "bn.bias": shift}, scores


def test_batch_normalization_trains_on_batch_statistics(tmp_path, rng):
    model, weights, statistics = _batch_norm_model(rng)
    paths = generate_artifacts(model, loss=LossType.CrossEntropyLoss, artifact_directory=tmp_path)
    # By default the running statistics do not train (torch's buffers); they stay constants.
    assert sorted(_parameters(paths)) == sorted(weights)
    x, labels = rng.standard_normal((N, IN)).astype(np.float32), rng.integers(0, OUT, N)
    results = _run(paths["training"], {"x": x, "labels": labels} | _parameters(paths))
    tensors, scores = _torch_batch_norm(weights, statistics, x, training=True)
    loss = F.cross_entropy(scores, torch.tensor(labels))
    loss.backward()
    _close(results["loss"], loss.item())
    for name, tensor in tensors.items():
        _close(results[f"{name}_grad"], tensor.grad, 1e-4)


def test_eval_models_have_training_mode_off(tmp_path, rng):
    model, weights, statistics = _batch_norm_model(rng, dropout=0.5)
    paths = generate_artifacts(model, loss=LossType.CrossEntropyLoss, artifact_directory=tmp_path)
    nodes = {n.op_type: n for n in onnx.load(paths["eval"]).graph.node}
    assert len(nodes["Dropout"].input) == 3 and nodes["Dropout"].input[2] == ""  # as 1.19's tests read it
    norm = nodes["BatchNormalization"]
    assert [a.i for a in norm.attribute if a.name == "training_mode"] == [0] and len(norm.output) == 1
    x, labels = rng.standard_normal((N, IN)).astype(np.float32), rng.integers(0, OUT, N)
    feeds = {"x": x, "labels": labels} | _parameters(paths)
    options = ort.SessionOptions()  # nothing folds a Dropout away
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    losses = [_run(paths["eval"], feeds, options)["loss"] for _ in range(3)]
    # The model without the dropout, normalized by the running statistics.
    _, scores = _torch_batch_norm(weights, statistics, x, training=False)
    assert losses[0] == losses[1] == losses[2]
    _close(losses[0], F.cross_entropy(scores, torch.tensor(labels)).item())
    # The inference model exported from the eval model follows it.
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state, paths["eval"])
    module.export_model_for_inferencing(tmp_path / "inference.onnx", ["scores"])
    outputs = [_run(tmp_path / "inference.onnx", {"x": x}, options)["scores"] for _ in range(2)]
    np.testing.assert_array_equal(outputs[0], outputs[1])
    _close(outputs[0], scores.detach(), 1e-4)


def _torch_loss(loss, scores, target):
    if loss is LossType.CrossEntropyLoss:
        return F.cross_entropy(scores, torch.tensor(target))
    function = {
        LossType.MSELoss: F.mse_loss,
        LossType.L1Loss: F.l1_loss,
        LossType.BCEWithLogitsLoss: F.binary_cross_entropy_with_logits,
    }[loss]
    return function(scores, torch.tensor(target, dtype=torch.float64))


@pytest.mark.parametrize("loss", list(LossType), ids=[t.name for t in LossType])
@pytest.mark.parametrize("logits", ["wide", "zero"])
def test_losses_match_torch(loss, logits, tmp_path, rng):
    # "wide": logits up to some hundreds, where exp overflows float32 (BCEWithLogits stays finite);
    # "zero": zero weights, every logit exactly 0, where BCEWithLogits' slope is sigmoid(0) - y.
    weights = _weights(rng, scale=40.0) if logits == "wide" else _weights(rng, scale=0.0)
    if logits == "zero":
        weights["fc.bias"][:] = 0
    paths = generate_artifacts(_linear_model(weights), loss=loss, artifact_directory=tmp_path)
    x = rng.standard_normal((N, IN)).astype(np.float32)
    if loss is LossType.CrossEntropyLoss:
        target_name, target = "labels", rng.integers(0, OUT, N)
    else:
        target_name, target = "target", rng.uniform(0.0, 1.0, (N, OUT)).astype(np.float32)
    results = _run(paths["training"], {"x": x, target_name: target} | _parameters(paths))
    w, b, scores = _torch_linear(weights, x)
    expected = _torch_loss(loss, scores, target)
    expected.backward()
    assert np.isfinite(results["loss"])
    _close(results["loss"], expected.item())
    _close(results["fc.weight_grad"], w.grad)
    _close(results["fc.bias_grad"], b.grad)


def _two_output_model(rng):
    weights = _weights(rng, "a") | _weights(rng, "b")
    nodes = [_linear(out="out_a", prefix="a"), _linear(out="out_b", prefix="b")]
    outputs = [_input("out_a", ["N", OUT]), _input("out_b", ["N", OUT])]
    inputs = [_input("x", ["N", IN]), _input("y", ["N", OUT])]
    return _model(nodes, inputs, outputs, weights), weights


def test_loss_input_names_choose_the_scores_and_the_target(tmp_path, rng):
    model, weights = _two_output_model(rng)
    x, y, t = (rng.standard_normal(s).astype(np.float32) for s in [(N, IN), (N, OUT), (N, OUT)])
    out_a = x.astype(np.float64) @ weights["a.weight"].T + weights["a.bias"]
    out_b = x.astype(np.float64) @ weights["b.weight"].T + weights["b.bias"]
    # The second output against a new input "target".
    paths = generate_artifacts(
        model, loss=LossType.MSELoss, artifact_directory=tmp_path / "b", loss_input_names=["out_b"]
    )
    assert [i.name for i in onnx.load(paths["training"]).graph.input][:3] == ["x", "y", "target"]
    loss = _run(paths["eval"], {"x": x, "y": y, "target": t} | _parameters(paths))["loss"]
    _close(loss, np.mean((out_b - t) ** 2))
    # The first output against the model's own input y: no new input.
    paths = generate_artifacts(
        model, loss=LossType.L1Loss, artifact_directory=tmp_path / "a", loss_input_names=["out_a", "y"]
    )
    assert "target" not in {i.name for i in onnx.load(paths["training"]).graph.input}
    _close(_run(paths["eval"], {"x": x, "y": y} | _parameters(paths))["loss"], np.mean(np.abs(out_a - y)))
    with pytest.raises(ValueError, match="loss_input_names for LossType.MSELoss are the scores' output and"):
        generate_artifacts(
            model, loss=LossType.MSELoss, artifact_directory=tmp_path, loss_input_names=["out_a", "y", "x"]
        )
    with pytest.raises(ValueError, match="'x' is not an output of the model"):
        generate_artifacts(model, loss=LossType.MSELoss, artifact_directory=tmp_path, loss_input_names=["x"])


def test_loss_input_names_without_loss_type_name_the_outputs(tmp_path, rng):
    # loss = mean(out_a), then out_b: both models output them in that order, as 1.19's do.
    model, weights = _two_output_model(rng)
    model.graph.node.append(helper.make_node("ReduceMean", ["out_a"], ["mean_a"], keepdims=0))
    model.graph.output.append(_input("mean_a", []))
    names = ["mean_a", "out_b"]
    paths = generate_artifacts(model, artifact_directory=tmp_path, loss_input_names=names)
    training_outputs = [o.name for o in onnx.load(paths["training"]).graph.output]
    assert training_outputs[:2] == names and set(training_outputs[2:]) == {f"{n}_grad" for n in weights}
    assert [o.name for o in onnx.load(paths["eval"]).graph.output] == names
    with pytest.raises(
        ValueError, match="loss_output_name='out_a' and loss_input_names\\[0\\]='mean_a' both name"
    ):
        generate_artifacts(
            model, artifact_directory=tmp_path, loss_input_names=names, loss_output_name="out_a"
        )


def test_string_inputs(tmp_path, rng):
    # onnxruntime-training's test model: strings cast to float, then a linear layer.
    weights = {
        "w": rng.standard_normal((IN, 2)).astype(np.float32),
        "b": rng.standard_normal(2).astype(np.float32),
    }
    nodes = [
        helper.make_node("Cast", ["input"], ["numbers"], to=TensorProto.FLOAT),
        helper.make_node("Gemm", ["numbers", "w", "b"], ["scores"]),
    ]
    model = _model(
        nodes, [_input("input", [1, IN], TensorProto.STRING)], [_input("scores", [1, 2])], weights, opset=21
    )
    paths = generate_artifacts(
        model,
        list(weights),
        loss=LossType.CrossEntropyLoss,
        optimizer=OptimType.AdamW,
        artifact_directory=tmp_path,
    )
    numbers = rng.standard_normal((1, IN)).round(3)
    strings, labels = numbers.astype(str), rng.integers(0, 2, 1)
    results = _run(paths["training"], {"input": strings, "labels": labels} | _parameters(paths))
    w, b = (torch.tensor(weights[n], dtype=torch.float64, requires_grad=True) for n in ("w", "b"))
    loss = F.cross_entropy(
        torch.tensor(numbers.astype(np.float32), dtype=torch.float64) @ w + b, torch.tensor(labels)
    )
    loss.backward()
    _close(results["loss"], loss.item())
    _close(results["w_grad"], w.grad)
    _close(results["b_grad"], b.grad)
    _close(
        _run(paths["eval"], {"input": strings, "labels": labels} | _parameters(paths))["loss"], loss.item()
    )
    # The training API binds strings as ONNX Runtime's Python API makes no OrtValue of them.
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state, paths["eval"])
    _close(module(strings, labels), loss.item())
    _close(state.parameters["w"].grad, w.grad)
    _close(module.eval()(strings, labels), loss.item())
