"""Model code that torch.onnx cannot export, replaced by the same computation while
``export_torch`` runs (and put back after). One entry per replaced attribute: the module that
holds it, its name, and a factory making the replacement from the original.

DeepSeek-V2 and Llama 4 rotate q and k by complex multiplication (``torch.polar``,
``view_as_complex``), and ONNX has no complex tensors. Their rotary modules output the complex
``exp(i theta)`` scaled by ``attention_scaling``; the replacement returns its real and imaginary
parts as ``[..., D/2, 2]``, and the rotation becomes the real form of the product, interleaved as the
complex pairs are: ``x * cos + rotate_every_two(x) * sin`` with each angle's cos and sin repeated
twice, which the fusion rewrites to RotaryPositionEmbedding mode 1."""

from __future__ import annotations

import contextlib
import importlib
import sys

_DEEPSEEK_V2 = "transformers.models.deepseek_v2.modeling_deepseek_v2"
_LLAMA4 = "transformers.models.llama4.modeling_llama4"


def _rotary_pairs(original):
    import torch
    from transformers.modeling_rope_utils import dynamic_rope_update

    @dynamic_rope_update
    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        return torch.stack((freqs.cos(), freqs.sin()), dim=-1) * self.attention_scaling

    return forward


def _rotate_pairs(heads_axis: int):
    """apply_rotary_emb for q and k whose heads lie on ``heads_axis`` (the tables broadcast there)."""

    def factory(original):
        import torch

        def apply_rotary_emb(xq, xk, freqs_cis):
            # freqs_cis: [B, S, D/2, 2] from _rotary_pairs; each angle's value twice.
            cos, sin = (
                torch.stack((t, t), dim=-1).flatten(-2).unsqueeze(heads_axis) for t in freqs_cis.unbind(-1)
            )

            def rotate(x):
                wide = x.float()
                pairs = torch.stack((-wide[..., 1::2], wide[..., ::2]), dim=-1).flatten(-2)
                return (wide * cos + pairs * sin).type_as(x)

            return rotate(xq), rotate(xk)

        return apply_rotary_emb

    return factory


# (module, attribute path inside it, factory of the replacement from the original)
PATCHES = [
    (_DEEPSEEK_V2, "DeepseekV2RotaryEmbedding.forward", _rotary_pairs),
    (_DEEPSEEK_V2, "apply_rotary_emb", _rotate_pairs(heads_axis=1)),  # q, k: [B, N, S, D]
    (_LLAMA4, "Llama4TextRotaryEmbedding.forward", _rotary_pairs),
    (_LLAMA4, "apply_rotary_emb", _rotate_pairs(heads_axis=2)),  # q, k: [B, S, N, D]
]


def _owner(module_name: str, path: str):
    owner = importlib.import_module(module_name)
    *parents, name = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, name


@contextlib.contextmanager
def exportable():
    """Inside the block, the entries of PATCHES whose modules are loaded (a model of theirs may be
    exported) are replaced."""
    applied = []
    try:
        for module_name, path, factory in PATCHES:
            if module_name not in sys.modules:
                continue
            owner, name = _owner(module_name, path)
            original = getattr(owner, name)
            setattr(owner, name, factory(original))
            applied.append((owner, name, original))
        yield
    finally:
        for owner, name, original in reversed(applied):
            setattr(owner, name, original)
