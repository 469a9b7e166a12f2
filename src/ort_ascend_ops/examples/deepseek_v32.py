"""A tiny random Hugging Face DeepSeek-V3.2 (DSA: MLA attention with the lightning indexer)
exported for training as a user would (``export_torch``, static shapes, opset 23), and PyTorch's
side of its indexer warm-up: the oracle the tests and ``models/deepseek_v32.py`` hold
``ort_ascend_ops.training.indexer_warmup`` to. Needs the ``[torch]`` extra, imported only when a
model is made; without it, the committed exports in ``models/hf`` serve."""

from __future__ import annotations

import numpy as np

BATCHES = (1, 2)
# transformers' attn_implementation of each batch size's export: SDPA, its default, exports a
# boolean mask and ONNX Attention-23 nodes; eager a float mask and the attention's Softmax. The
# fixtures cover both spellings, and the demo's (batch 2) is the default.
ATTENTION = {1: "eager", 2: "sdpa"}
SEQUENCE = 32
SEED = 0
# Byte tokens (the demo trains on text); two dense layers (first_k_dense_replace), 4 attention
# heads of MLA, and an indexer of 4 heads x 16 whose first 8 dims are rotated.
SIZES = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    first_k_dense_replace=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    q_lora_rank=32,
    kv_lora_rank=16,
    qk_rope_head_dim=8,
    qk_nope_head_dim=8,
    v_head_dim=8,
    index_n_heads=4,
    index_head_dim=16,
    index_topk=8,
    max_position_embeddings=64,
    use_cache=False,
)
LAYERS = SIZES["num_hidden_layers"]
TOP_K = SIZES["index_topk"]
# Per layer: 4 norms (input, post-attention, q_a and kv_a), plus the final one; the indexer's q
# and k rotated (mode 0), and the MLA attention's (interleaved pairs: mode 3).
NORMS = 4 * LAYERS + 1
ROTATED = 2 * LAYERS
MLA_ROTATED = 2 * LAYERS
MLPS = LAYERS  # first_k_dense_replace covers every layer: a gated MLP each, no experts
INDEXER_PARAMETERS = ("wq_b.weight", "wk.weight", "k_norm.weight", "k_norm.bias", "weights_proj.weight")
# torch.optim.AdamW steps of the warm-up oracle, at this learning rate (defaults otherwise).
ADAMW_STEPS, ADAMW_LR = 3, 1e-2


def name(size: int) -> str:
    return f"deepseek_v32_b{size}"


def model_path(size: int = BATCHES[-1]):
    """The committed export for batches of ``size`` (the wheel ships the largest: the demo's)."""
    from . import committed_model

    return committed_model(f"{name(size)}.onnx")


def describe() -> str:
    c = SIZES
    return (
        f"hidden {c['hidden_size']}, {LAYERS} layers of MLA ({c['num_attention_heads']} heads) with an indexer of "
        f"{c['index_n_heads']} heads x {c['index_head_dim']} choosing the top {TOP_K} keys, vocabulary "
        f"{c['vocab_size']} bytes"
    )


def indexer_parameters() -> list[str]:
    """The indexer's parameters, by state_dict key: what the warm-up trains."""
    return [f"model.layers.{i}.self_attn.indexer.{p}" for i in range(LAYERS) for p in INDEXER_PARAMETERS]


def language_model(attention: str):
    """The tiny causal LM with weights drawn from ``SEED``, perturbed (the init leaves norms at 1
    and biases at 0, which would hide a gradient taken w.r.t. the wrong one). ``attention`` is
    transformers' ``attn_implementation``: its default SDPA exports a boolean mask and ONNX
    Attention nodes, eager a float mask and the attention's MatMuls and Softmax (and gives the
    probabilities the oracle reads)."""
    import torch
    import transformers

    torch.manual_seed(SEED)
    config = transformers.DeepseekV32Config(**SIZES)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attention)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model.eval()


def batch(size: int) -> dict[str, np.ndarray]:
    """Token ids and labels for ``size`` sequences."""
    rng = np.random.default_rng([SEED, size])
    ids = rng.integers(0, SIZES["vocab_size"], (size, SEQUENCE), dtype=np.int64)
    return {"input_ids": ids, "labels": np.roll(ids, -1, axis=1)}


def export(size: int):
    """The model exported by ``export_torch`` for batches of ``size`` (shapes static: the causal
    mask folds to a constant, which the indexer fusion needs) with ``ATTENTION[size]``, the LM
    loss inside."""
    import torch

    from ..training import export_torch

    inputs = {k: torch.from_numpy(v) for k, v in batch(size).items()}
    return export_torch(language_model(ATTENTION[size]), inputs, opset=23)


def _valid(length: int):
    """``[S, K]``: the selection slots sparse_mode 3 allows, ``k < min(K, s + 1)``."""
    import torch

    return torch.arange(TOP_K)[None, :] < torch.arange(1, length + 1)[:, None]


def torch_warmup(size: int, steps: int = ADAMW_STEPS) -> dict[str, np.ndarray]:
    """PyTorch's indexer warm-up on one batch: the indexer of every layer scored as transformers
    scores it but with autograd, on its detached inputs, its top-k selection ties to the lower
    key; the target ``p`` the main attention's probabilities summed over heads, L1-normalized, on
    the selected keys; the loss ``sum_layers sum_tokens KL(p || softmax(selected scores))``.

    Returns ``loss`` and ``grad/<name>`` per indexer parameter at the initial weights,
    ``adamw_losses`` over ``steps`` steps of ``torch.optim.AdamW`` (lr ``ADAMW_LR``), and, from
    transformers' own forward (``torch.topk``, attention as exported), ``transformers/indices<l>``
    and the index scores ``transformers/scores<l>`` ``[B,S,S]`` of each layer."""
    import torch
    from transformers.models.deepseek_v32 import modeling_deepseek_v32 as ds

    inputs = {"input_ids": torch.from_numpy(batch(size)["input_ids"])}
    result = _transformers_selection(language_model(ATTENTION[size]), inputs)
    model = language_model("eager")

    selected, probabilities = [], []

    def indexer(
        self, hidden_states, q_resid, position_embeddings, attention_mask, position_ids=None, cache=None
    ):
        index = _index_scores(self, hidden_states.detach(), q_resid.detach(), position_embeddings)
        order = torch.sort(index.detach() + attention_mask, dim=-1, descending=True, stable=True).indices
        order = order[..., :TOP_K]
        selected.append((order, index.gather(-1, order)))
        return order.to(torch.int32)

    def keep_probabilities(module, args, output):
        probabilities.append(output[1].detach())

    hooks = [layer.self_attn.register_forward_hook(keep_probabilities) for layer in model.model.layers]
    original, ds.DeepseekV32Indexer.forward = ds.DeepseekV32Indexer.forward, indexer
    try:
        params = [p for n, p in model.named_parameters() if n in set(indexer_parameters())]
        optimizer = torch.optim.AdamW(params, lr=ADAMW_LR)
        losses = []
        for step in range(steps + 1):
            selected.clear()
            probabilities.clear()
            model(**inputs)
            loss = sum(
                _kl(order, scores, p) for (order, scores), p in zip(selected, probabilities, strict=True)
            )
            losses.append(loss.item())
            if step == 0:
                loss.backward()
                result["loss"] = loss.detach().numpy()
                named = dict(model.named_parameters())
                result |= {f"grad/{n}": named[n].grad.numpy().copy() for n in indexer_parameters()}
            elif step < steps:
                optimizer.zero_grad()
                loss.backward()
            if step < steps:
                optimizer.step()
    finally:
        ds.DeepseekV32Indexer.forward = original
        for hook in hooks:
            hook.remove()
    result["adamw_losses"] = np.array(losses)
    return result


def _kl(order, scores, probabilities):
    """``sum_t KL(p_t || softmax(scores_t))`` over each token's valid slots."""
    import torch
    import torch.nn.functional as F

    valid = _valid(order.shape[1])
    p = probabilities.sum(dim=1)
    p = (p / p.sum(dim=-1, keepdim=True)).gather(-1, order).masked_fill(~valid, 0.0)
    log_q = torch.log_softmax(scores.masked_fill(~valid, float("-inf")), dim=-1).masked_fill(~valid, 0.0)
    return F.kl_div(log_q, p, reduction="sum")


def _index_scores(indexer, hidden_states, q_resid, position_embeddings):
    """``[B,S,S]``: ``DeepseekV32Indexer``'s index scores before the mask, as its forward computes
    them (which runs under no_grad and returns only the top-k)."""
    import torch
    import torch.nn.functional as F
    from transformers.models.deepseek_v32 import modeling_deepseek_v32 as ds

    b, s, _ = hidden_states.shape
    rope, rest = indexer.qk_rope_head_dim, indexer.head_dim - indexer.qk_rope_head_dim
    q = indexer.wq_b(q_resid).view(b, s, indexer.n_heads, indexer.head_dim)
    q_rot, q_pass = torch.split(q, [rope, rest], dim=-1)
    k = indexer.k_norm(indexer.wk(hidden_states)).unsqueeze(2)
    k_rot, k_pass = torch.split(k, [rope, rest], dim=-1)
    q_rot, k_rot = ds.apply_rotary_pos_emb(q_rot, k_rot, *position_embeddings, unsqueeze_dim=2)
    q, k = torch.cat([q_rot, q_pass], dim=-1), torch.cat([k_rot, k_pass], dim=-1).squeeze(2)
    scores = F.relu(torch.matmul(q, k.transpose(-1, -2).unsqueeze(1)) * indexer.softmax_scale)
    weights = indexer.weights_proj(hidden_states) * indexer.n_heads**-0.5
    return torch.matmul(weights.unsqueeze(-2), scores).squeeze(-2)


def _transformers_selection(model, inputs) -> dict[str, np.ndarray]:
    """transformers' own indices (its forward, torch.topk) and the index scores, per layer."""
    import torch

    result: dict[str, np.ndarray] = {}

    def keep(module, args, kwargs, output):
        layer = len(result) // 2
        bound = dict(zip(("hidden_states", "q_resid", "position_embeddings"), args, strict=False)) | kwargs
        scores = _index_scores(module, bound["hidden_states"], bound["q_resid"], bound["position_embeddings"])
        result[f"transformers/indices{layer}"] = output.numpy()
        result[f"transformers/scores{layer}"] = scores.numpy()

    hooks = [
        layer.self_attn.indexer.register_forward_hook(keep, with_kwargs=True) for layer in model.model.layers
    ]
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return result
