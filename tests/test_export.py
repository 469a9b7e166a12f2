"""export_torch's handling of what torch.onnx cannot export as the model runs it: transformers'
experts (exported through their grouped product whatever implementation the model is set to, see
ort_ascend_ops.export.experts) and the complex rotary embeddings (ort_ascend_ops.export.patches),
held to PyTorch autograd; and the model is left as it was, by a failing export too. The matrix of
architectures (tests/test_architectures.py) holds every row to torch."""

import numpy as np
import pytest
from model_oracles import relative_error

from ort_ascend_ops import make_session
from ort_ascend_ops.examples import architectures
from ort_ascend_ops.examples.hf_models import SIZES, torch_inputs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ort_ascend_ops.export import patches  # noqa: E402
from ort_ascend_ops.training import build_training_model, export_torch  # noqa: E402


def trained_like_torch(model, data):
    """Our gradients of every parameter against torch's on ``data``; returns ours by name."""
    training = build_training_model(
        export_torch(model, torch_inputs(data)), "loss", [n for n, _ in model.named_parameters()]
    )
    results = dict(
        zip([o.name for o in training.graph.output], make_session(training).run(data), strict=True)
    )
    model.zero_grad()
    model(**torch_inputs(data)).loss.backward()
    for name, parameter in model.named_parameters():
        assert relative_error(results[f"{name}_grad"], parameter.grad.numpy()) < 1e-5, name
    return results


@pytest.mark.parametrize("implementation", ["grouped_mm", "eager", "batched_mm"])
def test_experts_no_token_is_routed_to_get_no_gradient(implementation):
    # 32 experts, two per token, 16 tokens: many experts get none (their grouped product has no
    # rows), and every token's experts must be the ones torch chose.
    arch = architectures.Architecture(
        "mixtral-sparse",
        "MixtralConfig",
        {"num_local_experts": 32, "num_experts_per_tok": 2},
        {"experts_implementation": implementation},
    )
    model = architectures.language_model(arch)
    results = trained_like_torch(model, architectures.batch(arch))
    for layer in range(SIZES["num_hidden_layers"]):
        name = f"model.layers.{layer}.mlp.experts.gate_up_proj"
        torch_idle = model.get_parameter(name).grad.abs().sum((1, 2)) == 0
        ours_idle = np.abs(results[f"{name}_grad"]).sum((1, 2)) == 0
        assert torch_idle.any(), "every expert got a token: the test lost its point"
        np.testing.assert_array_equal(ours_idle, torch_idle.numpy())
    assert model.config._experts_implementation == implementation  # set back after the export


def test_the_model_runs_as_it_did_after_an_export_that_fails():
    arch = next(a for a in architectures.ARCHITECTURES if a.name == "deepseek_v2")
    model = architectures.language_model(arch)
    module = __import__(type(model).__module__, fromlist=["apply_rotary_emb"])
    original = module.apply_rotary_emb, module.DeepseekV2RotaryEmbedding.forward
    implementation = model.config._experts_implementation
    with pytest.raises(IndexError):
        export_torch(
            model, {"input_ids": torch.zeros((2, 40), dtype=torch.int64) + 10**6}
        )  # ids past the vocabulary
    assert (module.apply_rotary_emb, module.DeepseekV2RotaryEmbedding.forward) == original
    assert model.config._experts_implementation == implementation
    trained_like_torch(model, architectures.batch(arch))


def test_every_patch_names_what_exists():
    # A transformers release that renames a patched function would leave it unpatched.
    for module_name, path, _ in patches.PATCHES:
        owner, name = patches._owner(module_name, path)
        assert callable(getattr(owner, name)), f"{module_name}.{path}"


class HandWrittenMoE(torch.nn.Module):
    """A mixture of experts as users write it: softmax routing, top-k, and a loop over the experts
    that picks each one's tokens with torch.where (NonZero) and adds its output back with
    index_add (ScatterND with reduction add); one expert's weights picked by index (Gather)."""

    def __init__(self, hidden=16, experts=4, top_k=2, inner=8):
        super().__init__()
        self.router = torch.nn.Linear(hidden, experts, bias=False)
        self.w_in = torch.nn.Parameter(0.3 * torch.randn(experts, hidden, inner))
        self.w_out = torch.nn.Parameter(0.3 * torch.randn(experts, inner, hidden))
        self.top_k, self.experts = top_k, experts

    def forward(self, x, target):
        weights, chosen = self.router(x).softmax(-1).topk(self.top_k, dim=-1)
        routed = torch.nn.functional.one_hot(chosen, self.experts)  # [tokens, top_k, experts]
        out = torch.zeros_like(x)
        for e in range(self.experts):
            token, slot = torch.where(routed[..., e] > 0)
            h = torch.nn.functional.silu(x[token] @ self.w_in[e]) @ self.w_out[e]
            out = out.index_add(0, token, h * weights[token, slot, None])
        return torch.nn.functional.mse_loss(out, target)


def test_a_hand_written_moe_with_nonzero_dispatch_trains_like_torch():
    torch.manual_seed(0)
    model = HandWrittenMoE()
    x, target = torch.randn(12, 16), torch.randn(12, 16)
    training = build_training_model(
        export_torch(model, (x, target)), "loss", [n for n, _ in model.named_parameters()]
    )
    assert {"NonZero", "TopK", "ScatterND"} <= {n.op_type for n in training.graph.node}
    results = make_session(training).run({"x": x.numpy(), "target": target.numpy()})
    model(x, target).backward()
    assert relative_error(results[0], model(x, target).item()) < 1e-6
    for (name, parameter), grad in zip(model.named_parameters(), results[1:], strict=True):
        assert relative_error(grad, parameter.grad.numpy()) < 1e-5, name
