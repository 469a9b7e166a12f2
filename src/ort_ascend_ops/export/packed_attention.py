"""Packed sequences with per-document attention, as Hugging Face models take them for
flash-attention training (``DataCollatorWithFlattening``): ``position_ids`` restarting at each
document and ``cu_seq_lens_q``, the documents' cumulative boundaries over the batch's flattened
tokens (a leading 0, then each document's end), passed through the model's keyword arguments to
its attention function.

``packed(model)`` switches the model's attention, while it is exported, to one registered with
transformers' ``AttentionInterface`` that calls the custom op ``ort_ascend_ops::packed_attention``
(and to a mask function that builds no mask: the boundaries are the mask). torch.onnx translates
that op to ``FlashAttentionScore`` in the TND layout, its actual sequence lengths the boundaries
and sparse mode 3 (causal in each document): no ``[S, S]`` mask exists, in the graph or in a
kernel. An attention that such an op cannot compute (a soft cap, attention sinks, a sliding
window shorter than the sequence, attention dropout) is a ``PackingError`` naming the model."""

from __future__ import annotations

import contextlib

import numpy as np

NAME = "ort_ascend_ops_packed"
POSITIONS, BOUNDARIES = "position_ids", "cu_seq_lens_q"  # transformers' names (FlashAttentionKwargs)
# The layer types (a config's ``layer_types``) that attend through the attention function.
ATTENTION_LAYERS = {"full_attention", "sliding_attention", "chunked_attention"}


class PackingError(ValueError):
    """A model whose attention cannot take per-document boundaries."""


def _op():
    """The custom op, defined once: ``query`` ``[B, N1, S, D]``, ``key`` and ``value``
    ``[B, N2, S, D(v)]`` as transformers' attention functions take them, ``ends`` the documents'
    cumulative ends over the ``B * S`` tokens; the result ``[B, S, N1, Dv]`` as they return it."""
    import torch

    existing = getattr(getattr(torch.ops, "ort_ascend_ops", None), "packed_attention", None)
    if existing is not None:
        return existing

    @torch.library.custom_op(
        "ort_ascend_ops::packed_attention",
        mutates_args=(),
        # Spelled out: this module's annotations are strings (``from __future__ import annotations``).
        schema="(Tensor query, Tensor key, Tensor value, Tensor ends, float scale) -> Tensor",
    )
    def packed_attention(query, key, value, ends, scale):
        batch, heads, seq, _ = query.shape
        tokens = torch.arange(batch * seq, device=query.device)
        document = torch.searchsorted(ends.to(torch.int64), tokens, right=True).reshape(batch, seq)
        causal = torch.ones(seq, seq, dtype=torch.bool, device=query.device).tril()
        allowed = (document[:, :, None] == document[:, None, :]) & causal
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=allowed[:, None], scale=scale, enable_gqa=heads != key.shape[1]
        )
        return out.transpose(1, 2).contiguous()

    @packed_attention.register_fake
    def _(query, key, value, ends, scale):
        batch, heads, seq, _ = query.shape
        return query.new_empty(batch, seq, heads, value.shape[-1])

    return torch.ops.ort_ascend_ops.packed_attention


def translations() -> dict:
    """torch.onnx's translation of the op: FlashAttentionScore, TND, sparse mode 3."""
    from onnxscript.onnx_opset import opset18 as op

    from ..opschema import register_schemas
    from ..reference._opset import ascend

    register_schemas()  # onnxscript reads the op's outputs off its schema

    def packed_attention(query, key, value, ends, scale: float):
        batch, heads, seq, dim = query.shape
        kv_heads, dim_v = key.shape[1], value.shape[-1]

        def tokens(x, n, d):
            return op.Reshape(op.Transpose(x, perm=[0, 2, 1, 3]), op.Constant(value_ints=[-1, n, d]))

        lengths = op.Cast(ends, to=7)  # int64
        out, _, _ = ascend.FlashAttentionScore(
            tokens(query, heads, dim),
            tokens(key, kv_heads, dim),
            tokens(value, kv_heads, dim_v),
            None,
            lengths,
            lengths,
            head_num=heads,
            input_layout="TND",
            scale_value=scale,
            sparse_mode=3,
            _outputs=3,
        )
        return op.Reshape(out, op.Constant(value_ints=[-1, seq, heads, dim_v]))

    return {_op().default: packed_attention}


_calls = [0]  # how many times _forward ran: check_packable's proof that the model calls it


def active(model) -> bool:
    """Whether ``model`` attends through the packed attention (inside ``packed``)."""
    return getattr(getattr(model, "config", None), "_attn_implementation", None) == NAME


def _forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """transformers' attention-function signature, for the packed batch."""
    _calls[0] += 1
    boundaries = kwargs.get(BOUNDARIES)
    name = type(module).__name__
    if boundaries is None:
        raise PackingError(
            f"{name} does not pass the model's keyword arguments to its attention function, so the documents' "
            f"boundaries ({BOUNDARIES}) cannot reach it"
        )
    if kwargs.get("softcap"):
        raise PackingError(f"{name}: a soft cap of its scores, which FlashAttentionScore does not compute")
    if kwargs.get("s_aux") is not None:
        raise PackingError(f"{name}: attention sinks, which FlashAttentionScore does not compute")
    window = kwargs.get("sliding_window")
    if window is not None and window < query.shape[2]:
        raise PackingError(f"{name}: a sliding window of {window} tokens, shorter than the sequence")
    if dropout:
        raise PackingError(f"{name}: attention dropout {dropout}, which FlashAttentionScore does not apply")
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    return _op()(query, key, value, boundaries[1:], float(scale)), None


def _no_mask(*args, **kwargs):
    return None


@contextlib.contextmanager
def packed(model):
    """Inside the block, ``model`` attends per document through the custom op; afterwards, as
    before. A ``PackingError`` when its attention is not transformers' attention interface."""
    from transformers import AttentionInterface, AttentionMaskInterface

    AttentionInterface.register(NAME, _forward)
    AttentionMaskInterface.register(NAME, _no_mask)
    before = model.config._attn_implementation
    try:
        model.set_attn_implementation(NAME)
    except (ValueError, AttributeError) as e:
        raise PackingError(
            f"{model.config.model_type}: its attention does not go through transformers' attention interface ({e})"
        ) from None
    try:
        yield
    finally:
        model.set_attn_implementation(before)


def boundaries(positions: np.ndarray) -> np.ndarray:
    """The documents' cumulative boundaries over the flattened tokens of ``positions`` (each
    token's position in its document), int32: 0, then each document's end."""
    flat = positions.reshape(-1)
    return np.append(np.flatnonzero(flat == 0), flat.size).astype(np.int32)


def sample(batch: int, seq: int) -> dict:
    """Inputs of a packed batch to export with: two documents a row (one where ``seq`` is 1)."""
    import torch

    half = max(seq // 2, 1)
    positions = np.tile(np.concatenate([np.arange(half), np.arange(seq - half)]), (batch, 1))
    ids = torch.zeros(batch, seq, dtype=torch.long)
    return {
        "input_ids": ids,
        "labels": ids.clone(),
        POSITIONS: torch.from_numpy(positions),
        BOUNDARIES: torch.from_numpy(boundaries(positions)),
    }


def dynamic_shapes(inputs: dict) -> dict:
    """The export's dynamic shapes: the number of documents alone changes from batch to batch."""
    import torch

    return {
        name: ({0: torch.export.Dim("documents", min=2)} if name == BOUNDARIES else None) for name in inputs
    }


def check_packable(model, seq: int) -> None:
    """A ``PackingError`` unless ``model``'s attention runs through ``packed`` at ``seq`` tokens a
    row (its config's window, then a forward of two short documents, no gradient)."""
    import torch

    mixing = sorted(set(getattr(model.config, "layer_types", None) or ()) - ATTENTION_LAYERS)
    if mixing:
        raise PackingError(
            f"{model.config.model_type}: its {', '.join(mixing)} layers mix tokens across documents without "
            "an attention function"
        )
    before = _calls[0]
    with packed(model), torch.no_grad():
        model(**sample(1, 4))
    if _calls[0] == before:
        raise PackingError(
            f"{model.config.model_type}: its attention does not call transformers' attention interface"
        )
    window = getattr(model.config, "sliding_window", None)
    if isinstance(window, int) and window < seq:
        raise PackingError(
            f"{model.config.model_type}: a sliding window of {window} tokens, shorter than the sequence ({seq})"
        )
