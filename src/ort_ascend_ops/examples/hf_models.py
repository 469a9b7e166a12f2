"""Tiny random Hugging Face causal LMs (Llama, Qwen2, Mistral) with their loss inside, exported
for training as a user would (``export_torch``), and the cases the tests run: every
architecture x export (static or dynamic shapes) x batch x opset x loss. ``models/hf_models.py``
saves each case's export with PyTorch's gradients; the live tests export them again. Needs the
``[torch]`` extra, imported only when a model is made."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

ARCHITECTURES = ("llama", "qwen2", "mistral")
EXPORTS = ("static", "dynamic")
BATCHES = (1, 2)
OPSETS = (18, 20, 23)
LOSSES = ("ce", "mse")
SEQUENCE = 8
SEED = 0
# GQA (4 query heads over 2 key-value heads) of head size 8, two layers: 5 norms (two per layer
# and the final one), 4 rotated tensors (q and k per layer), 2 attentions.
SIZES = dict(
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    vocab_size=48,
    max_position_embeddings=32,
    use_cache=False,
)
NORMS = 2 * SIZES["num_hidden_layers"] + 1
ROTATED = 2 * SIZES["num_hidden_layers"]
ATTENTIONS = SIZES["num_hidden_layers"]
MLPS = SIZES["num_hidden_layers"]


@dataclasses.dataclass(frozen=True)
class Export:
    """One exported model; a dynamic one serves every batch size."""

    arch: str
    export: str
    opset: int
    loss: str
    batch: int | None  # None: dynamic

    @property
    def name(self) -> str:
        shapes = f"static_b{self.batch}" if self.batch else "dynamic"
        return f"{self.arch}_{shapes}_opset{self.opset}_{self.loss}"


def exports() -> list[Export]:
    result = []
    for arch, export, opset, loss in itertools.product(ARCHITECTURES, EXPORTS, OPSETS, LOSSES):
        for batch in BATCHES if export == "static" else (None,):
            result.append(Export(arch, export, opset, loss, batch))
    return result


def gradients_name(arch: str, loss: str, batch: int) -> str:
    """PyTorch's gradients depend on the model, loss and batch, not on how it was exported."""
    return f"{arch}_{loss}_b{batch}"


def language_model(arch: str, dtype=None):
    """The architecture's tiny causal LM with weights drawn from ``SEED`` (transformers' init
    leaves the norm weights at 1, which would hide a gradient taken w.r.t. the wrong one)."""
    import torch
    import transformers

    config = {
        "llama": transformers.LlamaConfig,
        "qwen2": transformers.Qwen2Config,
        "mistral": transformers.MistralConfig,
    }
    torch.manual_seed(SEED)
    model = transformers.AutoModelForCausalLM.from_config(config[arch](**SIZES))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    return model.to(dtype) if dtype is not None else model


def module(arch: str, loss: str, dtype=None):
    """The module to export: the LM itself for cross-entropy (its ``labels`` input), or the LM's
    logits against a ``target`` for mean squared error."""
    import torch

    lm = language_model(arch, dtype)
    if loss == "ce":
        return lm

    class MseLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = lm

        def forward(self, input_ids, target):
            return torch.nn.functional.mse_loss(self.lm(input_ids=input_ids).logits, target)

    return MseLoss()


def batch(loss: str, size: int) -> dict[str, np.ndarray]:
    """The inputs for ``size`` sequences: token ids, and labels or a regression target."""
    rng = np.random.default_rng([SEED, size])
    ids = rng.integers(0, SIZES["vocab_size"], (size, SEQUENCE), dtype=np.int64)
    if loss == "ce":
        labels = ids.copy()
        labels[:, :2] = -100  # ignored positions, as a padded batch has
        return {"input_ids": ids, "labels": labels}
    return {
        "input_ids": ids,
        "target": rng.standard_normal((size, SEQUENCE, SIZES["vocab_size"])).astype(np.float32),
    }


def torch_inputs(inputs: dict[str, np.ndarray], dtype=None) -> dict:
    import torch

    return {
        k: torch.from_numpy(v).to(dtype) if v.dtype.kind == "f" and dtype else torch.from_numpy(v)
        for k, v in inputs.items()
    }


def export(case: Export, dtype=None):
    """The case exported by ``export_torch``, with one initializer per parameter."""
    import torch

    from ..training import export_torch

    inputs = torch_inputs(batch(case.loss, case.batch or max(BATCHES)), dtype)
    dynamic = None
    if case.batch is None:
        size, length = torch.export.Dim("batch"), torch.export.Dim("sequence")
        dynamic = {name: {0: size, 1: length} for name in inputs}
    return export_torch(module(case.arch, case.loss, dtype), inputs, dynamic_shapes=dynamic, opset=case.opset)


def torch_gradients(arch: str, loss: str, size: int, dtype=None) -> dict[str, np.ndarray]:
    """PyTorch autograd's loss and gradient of every parameter (by name) for one batch."""
    import torch

    model = module(arch, loss, dtype)
    value = model(**torch_inputs(batch(loss, size), dtype))
    value = value if isinstance(value, torch.Tensor) else value.loss
    value.backward()
    result = {"loss": value.detach().float().numpy()}
    result |= {name: p.grad.float().numpy() for name, p in model.named_parameters()}
    return result


CHAT_TOKENS = ("<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] not in ('system', 'user', 'assistant') %}"
    "{{ raise_exception('unknown role ' + message['role']) }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>\\n' }}"
    "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>\\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def write_model_directory(
    directory,
    texts: list[str],
    arch: str = "qwen2",
    *,
    vocab_size: int = 320,
    dtype=None,
    shard_size=None,
    sizes: dict | None = None,
    chat: bool = True,
):
    """A tiny causal-LM directory as ``save_pretrained`` writes it, with a byte-level BPE
    tokenizer trained on ``texts`` by ``tokenizers`` (the Hub is out of reach): GQA, tied
    embeddings, and q/k/v biases for qwen2. ``dtype`` (a torch dtype): the stored weights' and
    ``config.json``'s; ``shard_size`` (say "200KB"): sharded safetensors with their index; ``sizes``: config fields
    replacing ``SIZES``'s; ``chat``: the tokenizer has ChatML's tokens and template (Qwen2's), its
    assistant turns marked for transformers' ``return_assistant_tokens_mask``."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", *(CHAT_TOKENS if chat else ())],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(texts, trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")
    if chat:
        tokenizer.chat_template = CHAT_TEMPLATE
    sizes = SIZES | (sizes or {}) | {"vocab_size": bpe.get_vocab_size(), "tie_word_embeddings": True}
    configs = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config}
    config = configs[arch](**sizes, eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(SEED)
    model = transformers.AutoModelForCausalLM.from_config(config)
    if dtype is not None:
        model = model.to(dtype)
    options = {} if shard_size is None else {"max_shard_size": shard_size}
    model.save_pretrained(directory, **options)
    tokenizer.save_pretrained(directory)
    return model, tokenizer
