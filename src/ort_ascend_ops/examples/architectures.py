"""The decoder-only architectures of transformers that ``tests/test_architectures.py`` trains
against PyTorch autograd, one row each: a tiny config of every one (the sizes of
:mod:`.hf_models`, sliding windows shorter than the sequence, four experts of which each token
takes two), built as ``from_config`` builds it, its weights, norms and biases moved off their
initial values, and what its training graph must hold. A row with ``fails`` cannot train yet and
must fail with an error matching it. Needs the ``[torch]`` extra, imported only when a model is
made."""

from __future__ import annotations

import dataclasses

import numpy as np

from .hf_models import SEED, SEQUENCE, SIZES

WINDOW = 4  # sliding windows shorter than SEQUENCE, so that they mask something
EXPERTS = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16}
LOCAL_EXPERTS = {"num_local_experts": 4, "num_experts_per_tok": 2}
# DeepSeek's MLA (q and kv through low-rank projections, a rotary part of each head) and its
# MoE: routed experts in groups, each token's experts from its best topk_group groups.
MLA = {
    "num_key_value_heads": 4,
    "q_lora_rank": 24,
    "kv_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 8,
}
GROUPED = {
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 16,
    "first_k_dense_replace": 1,
    "n_group": 2,
    "topk_group": 1,
}
# Mamba-2's heads (4 of 16, the 2 x 32 inner width) and chunks of 4 of the 8 positions.
MAMBA2 = {
    "mamba_n_heads": 4,
    "mamba_d_head": 16,
    "mamba_d_state": 8,
    "mamba_n_groups": 1,
    "mamba_chunk_size": 4,
}
# Jamba: attention in layer 1, experts in layer 1, Mamba in layer 0.
JAMBA = {"attn_layer_period": 2, "attn_layer_offset": 1, "mamba_d_state": 8, "mamba_dt_rank": 4}
EXPERTS_OF_JAMBA = {
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "expert_layer_period": 2,
    "expert_layer_offset": 1,
}
HALF, INTERLEAVE, INTERLEAVE_HALF = 0, 1, 3  # RotaryPositionEmbedding's modes


@dataclasses.dataclass(frozen=True)
class Architecture:
    """One row: ``config`` is the transformers config class, ``settings`` what it sets beyond
    SIZES (and beyond the padding id, set in range wherever the config has one), ``options``
    ``from_config``'s keyword arguments (attention and experts implementations), ``rope_mode``
    the mode every fused rotary embedding must have (None: no rotary), ``dynamic`` an export with
    dynamic batch and sequence (checked at other sizes than exported), ``slow`` a row left to the
    slow run, ``fails`` the error (a regular expression) of a row that cannot train yet."""

    name: str
    config: str
    settings: dict = dataclasses.field(default_factory=dict)
    options: dict = dataclasses.field(default_factory=dict)
    rope_mode: int | None = HALF
    dynamic: bool = False
    slow: bool = False
    fails: str | None = None


ARCHITECTURES = [
    Architecture("llama", "LlamaConfig"),
    Architecture("mistral", "MistralConfig", {"sliding_window": WINDOW}),
    Architecture("qwen2", "Qwen2Config"),
    Architecture("qwen3", "Qwen3Config"),
    Architecture("phi3", "Phi3Config"),
    Architecture("granite", "GraniteConfig"),
    Architecture("olmo2", "Olmo2Config"),
    Architecture("glm4", "Glm4Config", rope_mode=INTERLEAVE),
    Architecture("stablelm", "StableLmConfig"),  # LayerNorm, a quarter of each head rotated
    Architecture("smollm3", "SmolLM3Config"),
    Architecture("gemma", "GemmaConfig"),
    Architecture("gemma2", "Gemma2Config", {"sliding_window": WINDOW}),
    Architecture("gemma3", "Gemma3TextConfig", {"sliding_window": WINDOW}),
    Architecture("cohere", "CohereConfig", rope_mode=INTERLEAVE),
    Architecture("cohere2", "Cohere2Config", {"sliding_window": WINDOW}, rope_mode=INTERLEAVE),
    Architecture("mixtral", "MixtralConfig", LOCAL_EXPERTS),
    Architecture("mixtral-dynamic", "MixtralConfig", LOCAL_EXPERTS, dynamic=True),
    Architecture(
        "mixtral-eager",
        "MixtralConfig",
        LOCAL_EXPERTS,
        {"experts_implementation": "eager", "attn_implementation": "eager"},
    ),
    Architecture("qwen2_moe", "Qwen2MoeConfig", {**EXPERTS, "shared_expert_intermediate_size": 24}),
    Architecture("qwen3_moe", "Qwen3MoeConfig", EXPERTS),
    Architecture(
        "qwen3_moe-batched-aux-loss",
        "Qwen3MoeConfig",
        {**EXPERTS, "output_router_logits": True},
        {"experts_implementation": "batched_mm"},
    ),
    Architecture("olmoe", "OlmoeConfig", {"num_experts": 4, "num_experts_per_tok": 2}),
    Architecture("granitemoe", "GraniteMoeConfig", LOCAL_EXPERTS),
    Architecture("glm4_moe", "Glm4MoeConfig", GROUPED),
    Architecture(
        "ernie4_5_moe",
        "Ernie4_5_MoeConfig",
        {"moe_num_experts": 4, "moe_k": 2, "moe_intermediate_size": 16},
        rope_mode=INTERLEAVE,
    ),
    # Attention sinks, sliding and full attention alternating, experts with clamped SwiGLU.
    Architecture("gpt_oss", "GptOssConfig", {**LOCAL_EXPERTS, "sliding_window": WINDOW}),
    Architecture("deepseek_v2", "DeepseekV2Config", {**MLA, **GROUPED}, rope_mode=INTERLEAVE),
    Architecture(
        "deepseek_v3-dense",
        "DeepseekV3Config",
        {**MLA, "first_k_dense_replace": 2},
        rope_mode=INTERLEAVE_HALF,
    ),
    Architecture("deepseek_v3", "DeepseekV3Config", {**MLA, **GROUPED}, rope_mode=INTERLEAVE_HALF),
    Architecture(
        "deepseek_v3-dynamic", "DeepseekV3Config", {**MLA, **GROUPED}, rope_mode=INTERLEAVE_HALF, dynamic=True
    ),
    Architecture(
        "deepseek_v3-eager",
        "DeepseekV3Config",
        {**MLA, **GROUPED},
        {"experts_implementation": "eager", "attn_implementation": "eager"},
        rope_mode=INTERLEAVE_HALF,
    ),
    # Others transformers has.
    Architecture(
        "llama4", "Llama4TextConfig", {**LOCAL_EXPERTS, "intermediate_size_mlp": 48}, rope_mode=INTERLEAVE
    ),
    Architecture("ministral", "MinistralConfig", {"sliding_window": WINDOW}),
    Architecture("olmo", "OlmoConfig"),
    Architecture("olmo3", "Olmo3Config", {"sliding_window": WINDOW}),
    Architecture("exaone4", "Exaone4Config", {"sliding_window": WINDOW}),
    Architecture("apertus", "ApertusConfig"),  # xIELU, learned scalars of its activation
    Architecture("helium", "HeliumConfig", rope_mode=INTERLEAVE),
    Architecture("arcee", "ArceeConfig"),
    Architecture("glm", "GlmConfig", rope_mode=INTERLEAVE),
    Architecture("nemotron", "NemotronConfig"),
    Architecture("starcoder2", "Starcoder2Config", {"sliding_window": WINDOW}),
    Architecture("phi", "PhiConfig"),
    Architecture("gpt_neox", "GPTNeoXConfig"),
    Architecture("gptj", "GPTJConfig", {"rotary_dim": SIZES["head_dim"]}, rope_mode=INTERLEAVE),
    Architecture("falcon", "FalconConfig", {"new_decoder_architecture": True}),
    Architecture("hunyuan_v1_dense", "HunYuanDenseV1Config"),
    Architecture("hunyuan_v1_moe", "HunYuanMoEV1Config", {"num_experts": 4, "moe_topk": 2}),
    Architecture("dots1", "Dots1Config", {**GROUPED, "n_shared_experts": 1}),
    Architecture("minimax", "MiniMaxConfig", LOCAL_EXPERTS),  # lightning (linear) attention layers
    Architecture("bitnet", "BitNetConfig"),
    Architecture("gpt2", "GPT2Config", rope_mode=None),
    # Hybrids of state-space layers and attention, each layer opening with a causal depthwise
    # convolution: Mamba's selective scan (Jamba's between attention and experts), Mamba-2's
    # chunked scan (Bamba, Falcon-H1 beside attention in every layer, GraniteMoeHybrid with
    # experts) in chunks shorter than the sequence, and Qwen3-Next's gated delta rule (its export
    # takes 20-40 s: left to the slow run).
    Architecture("mamba", "MambaConfig", rope_mode=None),
    Architecture("jamba", "JambaConfig", JAMBA, rope_mode=None),
    Architecture("bamba", "BambaConfig", {**MAMBA2, "attn_layer_indices": [1]}),
    Architecture("falcon_h1", "FalconH1Config", {**MAMBA2, "mamba_d_ssm": 64}),
    Architecture(
        "granitemoehybrid",
        "GraniteMoeHybridConfig",
        {**MAMBA2, **LOCAL_EXPERTS, "layer_types": ["mamba", "attention"]},
    ),
    Architecture(
        "qwen3_next", "Qwen3NextConfig", {**EXPERTS, "shared_expert_intermediate_size": 16}, slow=True
    ),
]


def config(arch: Architecture):
    """The row's tiny config: SIZES, the padding id in range where the config has one (its
    default, or 0 when that lies past the tiny vocabulary), no dropout (torch's random draw is not
    ours to replay), then the row's settings."""
    import transformers

    cls = getattr(transformers, arch.config)
    defaults = cls()
    sizes = {k: v for k, v in SIZES.items() if not isinstance(getattr(type(defaults), k, None), property)}
    pad = getattr(defaults, "pad_token_id", None)
    padding = {} if pad is None else {"pad_token_id": pad if pad < SIZES["vocab_size"] else 0}
    dropout = {k: 0.0 for k, v in defaults.to_dict().items() if "drop" in k and isinstance(v, float)}
    return cls(**{**sizes, **padding, **dropout, **arch.settings})


def language_model(arch: Architecture):
    """The row's causal LM from ``config(arch)``, every parameter moved by 0.1 of a normal draw
    from SEED (initial norm weights of 1 and biases of 0 would hide a gradient taken w.r.t. the
    wrong one), and the routers' ``e_score_correction_bias`` buffers (DeepSeek-V3's: zeros at
    first, which would leave the choice of experts as if they were not there) by one."""
    import torch
    import transformers

    torch.manual_seed(SEED)
    model = transformers.AutoModelForCausalLM.from_config(config(arch), **arch.options)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buffer.add_(torch.randn_like(buffer))
    return model


def batch(arch: Architecture, size: int = 2) -> dict[str, np.ndarray]:
    """Token ids with the padding id where the config has one (the last two of the first
    sequence, one in the middle of the second), and labels ignoring the first two positions."""
    rng = np.random.default_rng([SEED, size])
    ids = rng.integers(0, SIZES["vocab_size"], (size, SEQUENCE), dtype=np.int64)
    pad = getattr(config(arch), "pad_token_id", None)
    if pad is not None:
        ids[0, -2:] = pad
        ids[-1, SEQUENCE // 2] = pad
    labels = ids.copy()
    labels[:, :2] = -100
    return {"input_ids": ids, "labels": labels}
