"""Rules of the RotaryPositionEmbedding family: our RotaryPositionEmbedding, and the standard
opset-23 ``RotaryEmbedding``, which RotaryPositionEmbeddingGrad serves too."""

from __future__ import annotations

import onnx

from ...opschema import default
from ..graph import Backward, GradientError, Grads, attribute, first_grad, node_label
from .grad_nodes import grad_node


def rotary_position_embedding(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """RotaryPositionEmbedding(x, cos, sin) -> y: RotaryPositionEmbeddingGrad. dcos and dsin
    need the forward x, so x is passed (and they are asked for) only when the tables need
    gradients; usually they are constants and dx alone is computed."""
    dy = first_grad(grads)
    x, cos, sin = node.input
    mode = attribute(node, "mode", default("RotaryPositionEmbedding", "mode", int))
    if b.needs(cos) or b.needs(sin):
        dx, dcos, dsin = grad_node(
            b, "RotaryPositionEmbeddingGrad", [dy, cos, sin, x], [x, cos, sin], 3, mode=mode
        )
        return [dx, dcos, dsin]
    (dx,) = grad_node(b, "RotaryPositionEmbeddingGrad", [dy, cos, sin], [x], 3, mode=mode)
    return [dx, None, None]


def _full_width(b: Backward, half: str, interleaved: bool) -> str:
    """RotaryEmbedding's half-width table [B, S, D/2] as our op's full-width [B, S, D]: each value
    repeated twice in a row (interleaved: our mode 1), else the table twice over (our mode 0)."""
    if not interleaved:
        return b.op("Concat", half, half, axis=-1, hint=f"{half}_full")
    pairs = b.op("Unsqueeze", half, b.const([-1]), hint=f"{half}_pairs")
    doubled = b.op("Concat", pairs, pairs, axis=-1, hint=f"{half}_pairs")
    return b.op("Reshape", doubled, b.const([0, 0, -1]), hint=f"{half}_full")  # 0: keep B and S


def rotary_embedding(b: Backward, node: onnx.NodeProto, grads: Grads) -> Grads:
    """Standard RotaryEmbedding(X, cos_cache, sin_cache, [position_ids]): recomputes the
    full-width tables our op takes and emits RotaryPositionEmbeddingGrad for dX. Full rotation
    only; the caches get no gradient."""
    dy = first_grad(grads)
    x, cos_cache, sin_cache = node.input[:3]
    position_ids = node.input[3] if len(node.input) > 3 and node.input[3] else None
    label = f"{node_label(node)} (gradient rule rotary_embedding)"
    if b.needs(cos_cache) or b.needs(sin_cache):
        raise GradientError(f"{label}: gradients w.r.t. cos_cache and sin_cache are not supported")
    interleaved = bool(attribute(node, "interleaved", 0))
    rotary_dim = attribute(node, "rotary_embedding_dim", 0)
    num_heads = attribute(node, "num_heads", 0)
    shape = b.shape(x)
    if shape is None or len(shape) not in (3, 4):
        raise GradientError(f"{label}: X must be 4-D [B, N, S, D] or 3-D [B, S, N*D]")
    if len(shape) == 3 and not num_heads:
        raise GradientError(f"{label}: a 3-D X needs the num_heads attribute")
    hidden = shape[-1]
    head_size = hidden if len(shape) == 4 or hidden is None else hidden // num_heads
    # Partial rotation leaves X[..., rotary_dim:] unrotated, which our op cannot express.
    if rotary_dim not in (0, head_size):
        raise GradientError(
            f"{label}: only full rotation is supported (rotary_embedding_dim {rotary_dim}, "
            f"head size {head_size if head_size is not None else 'unknown'})"
        )

    # [B, S, D/2] tables, as the forward picks them, then [B, S, D] in our op's layout.
    tables = []
    for cache in (cos_cache, sin_cache):
        half = b.op("Gather", cache, position_ids, axis=0, hint=f"{cache}_picked") if position_ids else cache
        tables.append(_full_width(b, half, interleaved))
    mode = 1 if interleaved else 0
    if len(shape) == 4:  # X is [B, N, S, D]: the tables broadcast over the heads as [B, 1, S, D]
        cos, sin = (b.op("Unsqueeze", t, b.const([1])) for t in tables)
        (dx,) = grad_node(b, "RotaryPositionEmbeddingGrad", [dy, cos, sin], [x], 3, mode=mode)
        return [dx] + [None] * (len(node.input) - 1)
    # X is [B, S, N*D]: work on [B, S, N, D] with [B, S, 1, D] tables, then reshape dX back.
    dy_heads = b.op("Reshape", dy, b.const([0, 0, num_heads, -1]), hint=dy)
    cos, sin = (b.op("Unsqueeze", t, b.const([2])) for t in tables)
    (dx,) = grad_node(b, "RotaryPositionEmbeddingGrad", [dy_heads, cos, sin], [f"{x}_heads"], 3, mode=mode)
    return [b.reshape_like(dx, x)] + [None] * (len(node.input) - 1)
