"""Rules for this package's forward ops, which emit our grad ops, and for the standard opset-23
``RMSNormalization`` and ``RotaryEmbedding``, which our grad ops serve too."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from ...domain import DOMAIN
from ..graph import Backward, GradientError, attribute, node_label

# The element types our ops take (T in the contract).
_OUR_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16}


def _forward_output(b: Backward, node: onnx.NodeProto, index: int, hint: str) -> str:
    """The name of the forward node's output ``index``; one the node leaves out gets a fresh name
    (the node is the copy that goes into the training model, so the backward can read it)."""
    while len(node.output) <= index:
        node.output.append("")
    if not node.output[index]:
        node.output[index] = b.fresh(f"{node.output[0]}_{hint}", suffix="")
    return node.output[index]


def _grad_node(
    b: Backward, op_type: str, inputs: list[str], wanted: list[str], total: int, **attrs
) -> list[str]:
    """One of our grad nodes whose first outputs are the gradients of the forward values
    ``wanted`` (named after them), listing all ``total`` output slots (``""`` for the rest):
    ONNX Runtime inlines a reference function only for a node that lists every output it has."""
    names = [b.fresh(value) for value in wanted]
    outputs = names + [""] * (total - len(wanted))
    b.nodes.append(helper.make_node(op_type, inputs, outputs, domain=DOMAIN, **attrs))
    return names


def rms_norm(b: Backward, node: onnx.NodeProto, grads):
    """RmsNorm(x, gamma) -> y, rstd: RmsNormGrad(dy, x, rstd, gamma) with the rstd the forward
    saved, so the backward does not recompute the mean square."""
    dy = grads[0]
    if len(grads) > 1 and grads[1] is not None:
        # Nothing in a decoder differentiates through rstd; say so rather than drop its gradient.
        raise GradientError(f"{node_label(node)}: the gradient through its rstd output is not supported")
    x, gamma = node.input
    rstd = _forward_output(b, node, 1, "rstd")
    dx, dgamma = _grad_node(b, "RmsNormGrad", [dy, x, rstd, gamma], [x, gamma], 2)
    if b.needs(gamma) and b.elem_type(gamma) != TensorProto.FLOAT:
        # RmsNormGrad accumulates dgamma in float32 whatever gamma's type; the training model
        # promises each gradient in its value's type.
        dgamma = b.op("Cast", dgamma, to=b.elem_type(gamma), hint=gamma)
    return [dx if b.needs(x) else None, dgamma if b.needs(gamma) else None]


def rotary_position_embedding(b: Backward, node: onnx.NodeProto, grads):
    """RotaryPositionEmbedding(x, cos, sin) -> y: RotaryPositionEmbeddingGrad. dcos and dsin
    need the forward x, so x is passed (and they are asked for) only when the tables need
    gradients; usually they are constants and dx alone is computed."""
    (dy,) = grads
    x, cos, sin = node.input
    mode = attribute(node, "mode", 0)
    if b.needs(cos) or b.needs(sin):
        dx, dcos, dsin = _grad_node(
            b, "RotaryPositionEmbeddingGrad", [dy, cos, sin, x], [x, cos, sin], 3, mode=mode
        )
        return [dx, dcos, dsin]
    (dx,) = _grad_node(b, "RotaryPositionEmbeddingGrad", [dy, cos, sin], [x], 3, mode=mode)
    return [dx, None, None]


def lightning_indexer(b: Backward, node: onnx.NodeProto, grads):
    """LightningIndexer(query, key, weights, [lengths]) -> sparse_indices, sparse_values:
    LightningIndexerGrad on the selected values. The indices are a discrete choice: no gradient
    flows through them, and the backward reuses them so that it differentiates the same selection."""
    dy = grads[1] if len(grads) > 1 else None
    if dy is None:  # only the int32 indices reach the loss
        return [None] * len(node.input)
    query, key, weights = node.input[:3]
    shape = b.shape(query)
    head_num = shape[-2] if shape else None
    if head_num is None:
        raise GradientError(
            f"{node_label(node)}: LightningIndexerGrad needs head_num, but the head axis of "
            f"query '{query}' has no static size"
        )
    indices = _forward_output(b, node, 0, "sparse_indices")
    layout = attribute(node, "layout", "BSND")
    sparse_mode = attribute(node, "sparse_mode", 3)
    inputs = [query, key, dy, indices, weights, *node.input[3:]]
    d_query, d_key, d_weights = _grad_node(
        b,
        "LightningIndexerGrad",
        inputs,
        [query, key, weights],
        3,
        head_num=head_num,
        layout=layout,
        sparse_mode=sparse_mode,
    )
    return [d_query, d_key, d_weights] + [None] * (len(node.input) - 3)


def rms_normalization(b: Backward, node: onnx.NodeProto, grads):
    """Standard RMSNormalization(X, scale): rewritten in place to our RmsNorm, which computes the
    same thing and also saves rstd, then differentiated as RmsNorm. The training model still runs
    on stock ONNX Runtime through the RmsNorm function it carries."""
    x, scale = node.input
    rank = b.rank(x)
    axis = attribute(node, "axis", -1)
    axis = axis + rank if axis < 0 else axis
    x_shape, scale_shape = b.shape(x), b.shape(scale)
    label = f"{node_label(node)} (gradient rule rms_normalization)"
    # RmsNorm normalizes over the trailing rank(gamma) axes and does not broadcast gamma: the
    # scale must span exactly the normalized axes X.shape[axis:].
    if scale_shape is None or len(scale_shape) != rank - axis:
        raise GradientError(
            f"{label}: scale '{scale}' must have shape X.shape[{axis}:] (rank {rank - axis}) to map "
            f"onto RmsNorm, got {'an unknown shape' if scale_shape is None else scale_shape}"
        )
    for s, d in zip(scale_shape, x_shape[axis:], strict=True):
        if s is not None and d is not None and s != d:
            raise GradientError(
                f"{label}: scale '{scale}' of shape {scale_shape} broadcasts to X.shape[{axis}:] = "
                f"{x_shape[axis:]}; RmsNorm needs them equal"
            )
    # RMSNormalization's Y has scale's type, RmsNorm's y has x's: they must agree.
    if b.elem_type(x) != b.elem_type(scale) or b.elem_type(x) not in _OUR_TYPES:
        raise GradientError(
            f"{label}: X and scale must share one of float32, float16, bfloat16 to map onto RmsNorm"
        )
    # RmsNorm computes in float32, which is stash_type 1 (the default).
    if attribute(node, "stash_type", 1) != TensorProto.FLOAT:
        raise GradientError(f"{label}: only stash_type 1 (float32) maps onto RmsNorm")
    epsilon = attribute(node, "epsilon", 1e-5)  # RmsNorm's own default is 1e-6: always set it
    node.op_type, node.domain = "RmsNorm", DOMAIN
    del node.attribute[:]
    node.attribute.append(helper.make_attribute("epsilon", epsilon))
    return rms_norm(b, node, grads)


def _full_width(b: Backward, half: str, interleaved: bool) -> str:
    """RotaryEmbedding's half-width table [B, S, D/2] as our op's full-width [B, S, D]: each value
    repeated twice in a row (interleaved: our mode 1), else the table twice over (our mode 0)."""
    if not interleaved:
        return b.op("Concat", half, half, axis=-1, hint=f"{half}_full")
    pairs = b.op("Unsqueeze", half, b.const([-1]), hint=f"{half}_pairs")
    doubled = b.op("Concat", pairs, pairs, axis=-1, hint=f"{half}_pairs")
    return b.op("Reshape", doubled, b.const([0, 0, -1]), hint=f"{half}_full")  # 0: keep B and S


def rotary_embedding(b: Backward, node: onnx.NodeProto, grads):
    """Standard RotaryEmbedding(X, cos_cache, sin_cache, [position_ids]): recomputes the
    full-width tables our op takes and emits RotaryPositionEmbeddingGrad for dX. Full rotation
    only; the caches get no gradient."""
    (dy,) = grads
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
        (dx,) = _grad_node(b, "RotaryPositionEmbeddingGrad", [dy, cos, sin], [x], 3, mode=mode)
        return [dx] + [None] * (len(node.input) - 1)
    # X is [B, S, N*D]: work on [B, S, N, D] with [B, S, 1, D] tables, then reshape dX back.
    dy_heads = b.op("Reshape", dy, b.const([0, 0, num_heads, -1]), hint=dy)
    cos, sin = (b.op("Unsqueeze", t, b.const([2])) for t in tables)
    (dx,) = _grad_node(b, "RotaryPositionEmbeddingGrad", [dy_heads, cos, sin], [f"{x}_heads"], 3, mode=mode)
    return [b.reshape_like(dx, x)] + [None] * (len(node.input) - 1)
