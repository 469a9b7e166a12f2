"""Hugging Face Llama, Qwen2 and Mistral exports (models/hf, made by models/hf_models.py with
export_torch) trained through build_training_model: the graph carries one RmsNormGrad per norm,
one RotaryPositionEmbeddingGrad per rotated tensor and one FlashAttentionScoreGrad per layer,
and every parameter's gradient equals PyTorch autograd's on the same weights and batch, native
and portable; fuse keeps the outputs.
With torch and transformers installed, Qwen2 and Mistral are exported again live (Llama in
tests/test_training_loop.py)."""

import collections
import functools
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_oracles import relative_error

from ort_ascend_ops import fuse, make_session
from ort_ascend_ops.examples import hf_models as hf
from ort_ascend_ops.training import build_training_model

FIXTURES = Path(__file__).parents[1] / "models" / "hf"
CASES = [(e, size) for e in hf.exports() for size in ([e.batch] if e.batch else hf.BATCHES)]
FLOAT32_TOLERANCE = 1e-5
GRAD_OPS = {
    "RmsNormGrad": hf.NORMS,
    "RotaryPositionEmbeddingGrad": hf.ROTATED,
    "FlashAttentionScoreGrad": hf.ATTENTIONS,
    "SwiGluGrad": hf.MLPS,
}
BFLOAT16_TOLERANCE = 3e-2


@functools.cache
def expected(name: str) -> dict[str, np.ndarray]:
    return dict(np.load(FIXTURES / f"{name}.npz"))


def inputs_of(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v for k, v in data.items() if k != "loss" and not k.startswith("grad/")}


def parameters_of(data: dict[str, np.ndarray]) -> list[str]:
    return [k.removeprefix("grad/") for k in data if k.startswith("grad/")]


@functools.cache
def exported(name: str) -> onnx.ModelProto:
    return onnx.load(FIXTURES / f"{name}.onnx")


@functools.cache
def training(case: hf.Export) -> onnx.ModelProto:
    """Built once per export: a dynamic one serves both batch sizes."""
    parameters = parameters_of(expected(hf.gradients_name(case.arch, case.loss, hf.BATCHES[0])))
    return build_training_model(exported(case.name), "loss", parameters)


def grad_ops(model):
    return collections.Counter(n.op_type for n in model.graph.node if n.op_type.endswith("Grad"))


def outputs_of(model, inputs, native=True):
    """The model's outputs on ``inputs``, by name."""
    names = [o.name for o in model.graph.output]
    return dict(zip(names, make_session(model, native=native).run(inputs), strict=True))


def worst_gradient_error(model, data, native):
    results = outputs_of(model, inputs_of(data), native)
    assert relative_error(results["loss"], data["loss"]) < FLOAT32_TOLERANCE
    return max(relative_error(results[f"{p}_grad"], data[f"grad/{p}"]) for p in parameters_of(data))


@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
@pytest.mark.parametrize("case, size", CASES, ids=[f"{e.name}-b{size}" for e, size in CASES])
def test_gradients_equal_torch_autograd(case, size, native):
    model = training(case)
    assert grad_ops(model) == GRAD_OPS
    data = expected(hf.gradients_name(case.arch, case.loss, size))
    assert worst_gradient_error(model, data, native) < FLOAT32_TOLERANCE


@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
def test_bfloat16_gradients_equal_torch_autograd(native):
    case = hf.Export("llama", "dynamic", 23, "ce", None)
    data = expected(f"{hf.gradients_name(case.arch, case.loss, 2)}_bf16")
    model = build_training_model(exported(f"{case.name}_bf16"), "loss", parameters_of(data))
    assert grad_ops(model) == GRAD_OPS
    results = outputs_of(model, inputs_of(data), native)
    # Both sides round to bfloat16, each in its own places (SwiGlu rounds once where torch rounds
    # the SiLU and the product; the attention kernels round P and dS before their products, as
    # torch's CPU kernel and the vendor's do; the portable path does not): next to torch's
    # float32 gradients, ours must be about as close as torch's own, within a tenth more error.
    fp32 = expected(hf.gradients_name(case.arch, case.loss, 2))
    for p in parameters_of(data):
        ours = results[f"{p}_grad"].astype(np.float32)
        assert relative_error(ours, data[f"grad/{p}"]) < BFLOAT16_TOLERANCE, p
        torch_error = relative_error(data[f"grad/{p}"], fp32[f"grad/{p}"])
        assert relative_error(ours, fp32[f"grad/{p}"]) <= 1.1 * torch_error, p


FUSED = [e for e in hf.exports() if e.loss == "ce" and e.batch in (None, 2)]


@pytest.mark.parametrize("case", FUSED, ids=[e.name for e in FUSED])
def test_fuse_keeps_the_outputs(case):
    model = exported(case.name)
    fused = fuse(model)
    ours = collections.Counter(n.op_type for n in fused.graph.node if n.domain == "ort_ascend_ops")
    assert ours == {
        "RmsNorm": hf.NORMS,
        "RotaryPositionEmbedding": hf.ROTATED,
        "FlashAttentionScore": hf.ATTENTIONS,
        "SwiGlu": hf.MLPS,
    }
    onnx.checker.check_model(fused, full_check=True)
    inputs = inputs_of(expected(hf.gradients_name(case.arch, case.loss, 2)))
    before = make_session(model, native=False).run(inputs)
    for native in (True, False):
        after = make_session(fused, native=native).run(inputs)
        for a, b in zip(after, before, strict=True):
            assert relative_error(a, b) < FLOAT32_TOLERANCE


# Llama is exported live by tests/test_training_loop.py: models/byte_llama.py's export of a Hugging
# Face Llama (batch and sequence dynamic, opset 23, the CE loss inside) must equal the committed
# byte_llama.onnx byte for byte, which that file trains step for step against PyTorch.
LIVE = [
    hf.Export("qwen2", "static", 18, "mse", 2),
    hf.Export("mistral", "dynamic", 20, "mse", None),
]


@pytest.mark.parametrize("case", LIVE, ids=[e.name for e in LIVE])
def test_live_export_trains_like_torch(case):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    model = hf.export(case)
    params = [name for name, _ in hf.module(case.arch, case.loss).named_parameters()]
    assert set(params) <= {i.name for i in model.graph.initializer}  # named by their state_dict keys
    training_model = build_training_model(model, "loss", params)
    size = case.batch or 1
    data = hf.torch_gradients(case.arch, case.loss, size)
    data = {**hf.batch(case.loss, size), "loss": data.pop("loss")} | {f"grad/{k}": v for k, v in data.items()}
    for native in (True, False):
        assert worst_gradient_error(training_model, data, native) < FLOAT32_TOLERANCE


def test_tied_and_equal_weights_stay_one_initializer_per_parameter():
    # A fresh model's norm weights are all ones: the exporter's optimizer would merge them, and
    # store the projections transposed. Tied embeddings are one parameter, under its first name.
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from ort_ascend_ops.training import export_torch

    torch.manual_seed(0)
    config = transformers.Qwen2Config(**{**hf.SIZES, "tie_word_embeddings": True})
    lm = transformers.AutoModelForCausalLM.from_config(config)
    assert lm.lm_head.weight is lm.model.embed_tokens.weight
    data = hf.batch("ce", 2)
    model = export_torch(lm, hf.torch_inputs(data))
    stored = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    parameters = dict(lm.named_parameters())
    assert "lm_head.weight" not in parameters and "lm_head.weight" not in stored
    for name, parameter in parameters.items():
        np.testing.assert_array_equal(stored[name], parameter.detach().numpy(), err_msg=name)
    lm(**hf.torch_inputs(data)).loss.backward()
    training_model = build_training_model(model, "loss", list(parameters))
    results = outputs_of(training_model, data)
    for name, parameter in parameters.items():  # the tied one: the sum over both uses
        assert relative_error(results[f"{name}_grad"], parameter.grad.numpy()) < FLOAT32_TOLERANCE, name


def test_an_embeddings_padding_row_takes_no_gradient_as_in_torch():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from ort_ascend_ops.training import export_torch

    torch.manual_seed(0)
    lm = transformers.AutoModelForCausalLM.from_config(
        transformers.LlamaConfig(**{**hf.SIZES, "pad_token_id": 0})
    )
    data = hf.batch("ce", 2)
    data["input_ids"][:, -2:] = 0  # padded at the end
    model = export_torch(lm, hf.torch_inputs(data))
    lm(**hf.torch_inputs(data)).loss.backward()
    training_model = build_training_model(model, "loss", ["model.embed_tokens.weight"])
    (_, grad) = make_session(training_model).run(data)
    expected_grad = lm.model.embed_tokens.weight.grad.numpy()
    assert not expected_grad[0].any()
    assert relative_error(grad, expected_grad) < FLOAT32_TOLERANCE


def test_the_package_imports_without_torch():
    script = (
        "import sys; sys.modules['torch'] = sys.modules['transformers'] = None\n"
        "import ort_ascend_ops, ort_ascend_ops.training, ort_ascend_ops.examples.hf_models\n"
        "from ort_ascend_ops.training import export_torch\n"
        "try:\n    export_torch(None, ())\nexcept ImportError as e:\n    print(e)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "pip install 'ort_ascend_ops[torch]'" in result.stdout
