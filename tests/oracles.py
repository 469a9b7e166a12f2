"""Independent float64 NumPy oracles, written from the contract's formulas, and the tolerances the
tests hold every path to."""

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
PAIRS = [(F32, F32), (F16, F16), (F16, F32), (BF16, BF16), (BF16, F32)]
# Relative tolerance ||out - ref|| / ||ref|| for outputs of type T; float32 outputs (rstd,
# dgamma) always use F32's.
TOL = {F32: 1e-5, F16: 2e-3, BF16: 1e-2}
SHAPES = [  # (x.shape, gamma.shape)
    ((2, 3, 64), (64,)),
    ((4, 32), (4, 32)),  # rank(gamma) == rank(x): n = 0
    ((2, 3, 4, 16), (4, 16)),  # rank(gamma) == 2
    ((0, 8), (8,)),  # empty leading extent
    ((3, 0), (0,)),  # empty normalized extent
]


def pair_id(pair):
    return f"{pair[0].name}-{pair[1].name}"


def rms_norm_oracle(x, gamma, epsilon):
    x, gamma = x.astype(np.float64), gamma.astype(np.float64)
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    mean_sq = np.sum(x * x, axis=axes, keepdims=True) / max(gamma.size, 1)
    rstd = 1.0 / np.sqrt(mean_sq + epsilon)
    return x * rstd * gamma, rstd


def rms_norm_grad_oracle(dy, x, rstd, gamma):
    dy, x, gamma = dy.astype(np.float64), x.astype(np.float64), gamma.astype(np.float64)
    n = x.ndim - gamma.ndim
    rstd = rstd.astype(np.float64).reshape(x.shape[:n] + (1,) * gamma.ndim)
    xhat = x * rstd
    g = dy * gamma
    mean_gx = np.sum(g * xhat, axis=tuple(range(n, x.ndim)), keepdims=True) / max(gamma.size, 1)
    return rstd * (g - xhat * mean_gx), np.sum(dy * xhat, axis=tuple(range(n)))


def assert_close(out, ref, tol):
    out = np.asarray(out)
    assert out.shape == ref.shape
    err = np.linalg.norm(out.astype(np.float64) - ref)
    assert err <= tol * np.linalg.norm(ref), f"relative error {err / np.linalg.norm(ref):.3g} > {tol}"


def rms_norm_grad_inputs(rng, x_shape, gamma_shape, t, tg):
    """Random RmsNormGrad inputs, with the rstd the forward would save."""
    x = rng.standard_normal(x_shape).astype(t)
    gamma = rng.standard_normal(gamma_shape).astype(tg)
    rstd = rms_norm_oracle(x, gamma, 1e-6)[1].astype(np.float32)
    return {"dy": rng.standard_normal(x_shape).astype(t), "x": x, "rstd": rstd, "gamma": gamma}


# RotaryPositionEmbedding layouts the seed page names: (name, x/dy shape, cos/sin shape), with
# B=2, N=3, S=5, D=16 and T=7.
ROPE_LAYOUTS = [
    ("BNSD-11SD", (2, 3, 5, 16), (1, 1, 5, 16)),
    ("BNSD-B1SD", (2, 3, 5, 16), (2, 1, 5, 16)),
    ("BNSD-BNSD", (2, 3, 5, 16), (2, 3, 5, 16)),
    ("BSND-1S1D", (2, 5, 3, 16), (1, 5, 1, 16)),
    ("BSND-BS1D", (2, 5, 3, 16), (2, 5, 1, 16)),
    ("BSND-BSND", (2, 5, 3, 16), (2, 5, 3, 16)),
    ("SBND-S11D", (5, 2, 3, 16), (5, 1, 1, 16)),
    ("SBND-SB1D", (5, 2, 3, 16), (5, 2, 1, 16)),
    ("SBND-SBND", (5, 2, 3, 16), (5, 2, 3, 16)),
    ("TND-T1D", (7, 3, 16), (7, 1, 16)),
    ("TND-TND", (7, 3, 16), (7, 3, 16)),
]
# Last axes that take the kernels' other paths: 12 (6 pairs, fewer than one 8-pair vector), 64
# (runs of pairs that hold whole 16s, which bfloat16 takes 16 at a time in modes 0 and 2) and 72
# (runs of 36 or 18 pairs: vectors, then the last pairs one by one).
ROPE_OTHER_D = [
    ("BSND-1S1D-D12", (2, 5, 3, 12), (1, 5, 1, 12)),
    ("BSND-1S1D-D64", (2, 5, 3, 64), (1, 5, 1, 64)),
    ("BSND-1S1D-D72", (2, 5, 3, 72), (1, 5, 1, 72)),
]
ROPE_MODES = [0, 1, 2, 3]  # half, interleave, quarter, interleave-half


def rope_inputs(rng, layout, t, *names):
    """Random inputs `names` (x, dy: the data shape; cos, sin: the table shape) for a layout."""
    _, data_shape, table_shape = layout
    shapes = {"x": data_shape, "dy": data_shape, "cos": table_shape, "sin": table_shape}
    return {name: rng.standard_normal(shapes[name]).astype(t) for name in names}


def _halves(a):
    return np.split(a, 2, axis=-1)


def _quarters(a):
    return np.split(a, 4, axis=-1)


def _evens_odds(a):
    return a[..., ::2], a[..., 1::2]


def rope_oracle(x, cos, sin, mode):
    """The contract's y = x * cos + rotate(x) * sin."""
    x, cos, sin = (a.astype(np.float64) for a in (x, cos, sin))
    if mode == 3:  # de-interleave, then as mode 0
        x, mode = np.concatenate(_evens_odds(x), axis=-1), 0
    if mode == 0:
        x1, x2 = _halves(x)
        rotated = np.concatenate((-x2, x1), axis=-1)
    elif mode == 1:
        x1, x2 = _evens_odds(x)
        rotated = np.stack((-x2, x1), axis=-1).reshape(x.shape)
    else:
        x1, x2, x3, x4 = _quarters(x)
        rotated = np.concatenate((-x2, x1, -x4, x3), axis=-1)
    return x * cos + rotated * sin


def rope_grad_oracle(dy, cos, sin, x, mode):
    """The seed page's per-mode formulas: dx, and (dcos, dsin) summed over the axes cos broadcasts
    along (keepdims) when x is given."""
    dims = tuple(i for i in range(dy.ndim) if cos.shape[i] != dy.shape[i])
    dy, cos, sin = (a.astype(np.float64) for a in (dy, cos, sin))
    if mode == 2:
        (dy1, dy2, dy3, dy4), (c1, c2, c3, c4), (s1, s2, s3, s4) = map(_quarters, (dy, cos, sin))
        parts = (c1 * dy1 + s2 * dy2, c2 * dy2 - s1 * dy1, c3 * dy3 + s4 * dy4, c4 * dy4 - s3 * dy3)
        dx = np.concatenate(parts, axis=-1)
    else:
        split = _evens_odds if mode == 1 else _halves
        (dy1, dy2), (c1, c2), (s1, s2) = map(split, (dy, cos, sin))
        parts = (c1 * dy1 + s2 * dy2, c2 * dy2 - s1 * dy1)
        dx = np.concatenate(parts, axis=-1) if mode == 0 else np.stack(parts, axis=-1).reshape(dy.shape)
    if x is None:
        return dx, None, None
    x = x.astype(np.float64)
    if mode == 0:
        x1, x2 = _halves(x)
        for_cos, for_sin = x, np.concatenate((-x2, x1), axis=-1)
    elif mode == 1:
        x1, x2 = _evens_odds(x)
        for_cos, for_sin = x, np.stack((-x2, x1), axis=-1).reshape(x.shape)
    elif mode == 2:
        x1, x2, x3, x4 = _quarters(x)
        for_cos, for_sin = x, np.concatenate((-x2, x1, -x4, x3), axis=-1)
    else:
        x1, x2 = _evens_odds(x)
        for_cos, for_sin = np.concatenate((x1, x2), axis=-1), np.concatenate((-x2, x1), axis=-1)
    return dx, np.sum(dy * for_cos, axis=dims, keepdims=True), np.sum(dy * for_sin, axis=dims, keepdims=True)


# aclnnRotaryPositionEmbeddingGrad's example: mode 1, dy/cos/sin of shape [1, 1, 1, 128], no x.
# fmt: off
ROPE_SEED_DY = [
    74, 54, 84, 125, 23, 78, 37, 72, 27, 98, 34, 107, 29, 23, 54, 60, 70, 49, 119, 54, 29, 54,
    41, 99, 27, 62, 5, 46, 108, 39, 24, 123, 33, 82, 6, 40, 88, 24, 6, 116, 38, 119, 110, 5,
    30, 79, 87, 18, 29, 100, 90, 24, 21, 93, 63, 68, 34, 112, 119, 48, 74, 43, 85, 64, 14, 49,
    128, 59, 18, 37, 123, 76, 14, 63, 10, 39, 107, 124, 79, 16, 17, 76, 80, 47, 90, 41, 58, 82,
    75, 80, 69, 37, 74, 36, 54, 26, 32, 54, 13, 100, 105, 15, 13, 69, 122, 26, 94, 59, 29, 14,
    60, 8, 24, 17, 45, 33, 107, 122, 63, 111, 75, 128, 68, 31, 105, 6, 82, 99,
]
ROPE_SEED_COS = [
    41, 37, 17, 25, 49, 25, 22, 24, 110, 120, 107, 3, 82, 66, 75, 86, 85, 115, 110, 56, 52, 39,
    86, 23, 36, 71, 20, 73, 113, 25, 114, 56, 125, 80, 95, 82, 31, 63, 99, 62, 23, 55, 30, 99,
    42, 121, 15, 24, 97, 87, 81, 67, 43, 21, 13, 9, 33, 29, 117, 10, 114, 61, 98, 15, 78, 108,
    48, 97, 1, 3, 78, 109, 57, 46, 47, 56, 50, 66, 81, 77, 17, 128, 68, 121, 47, 91, 114, 125,
    51, 108, 31, 15, 47, 78, 109, 115, 113, 26, 53, 97, 1, 111, 103, 58, 106, 68, 11, 104, 22, 79,
    61, 127, 86, 39, 33, 123, 102, 39, 64, 41, 119, 120, 61, 29, 94, 68, 36, 12,
]
ROPE_SEED_SIN = [
    46, 56, 56, 101, 66, 10, 96, 16, 86, 57, 102, 66, 12, 105, 76, 58, 90, 6, 79, 128, 126, 82,
    41, 3, 45, 7, 66, 4, 46, 22, 31, 26, 37, 63, 97, 84, 91, 90, 47, 77, 90, 34, 41, 83,
    91, 108, 120, 13, 90, 32, 85, 37, 119, 31, 51, 82, 122, 125, 7, 116, 121, 108, 38, 56, 100, 20,
    97, 119, 10, 4, 53, 13, 46, 82, 103, 119, 124, 80, 23, 67, 78, 56, 119, 122, 40, 58, 128, 27,
    30, 52, 71, 42, 123, 69, 4, 5, 116, 97, 38, 107, 8, 4, 65, 120, 40, 22, 60, 44, 48, 66,
    68, 125, 4, 93, 112, 112, 113, 90, 94, 23, 104, 39, 85, 84, 64, 128, 96, 119,
]
# fmt: on


def _lightning_tokens(
    layout, query, key, weights, actual_seq_lengths_query=None, actual_seq_lengths_key=None
):
    """The contract's per-token view: query [T1, N1, D], key [T2, D], weights [T1, N1] in float64,
    and per token (position s in its batch, S1_b, S2_b, the batch's first key row)."""
    if layout == "BSND":
        batches, s1, n1, d = query.shape
        ends_q = s1 * np.arange(1, batches + 1)
        ends_k = key.shape[1] * np.arange(1, batches + 1)
    else:
        (_, n1, d), ends_q, ends_k = query.shape, actual_seq_lengths_query, actual_seq_lengths_key
    starts_q = np.concatenate([[0], ends_q])[:-1].astype(int)
    starts_k = np.concatenate([[0], ends_k])[:-1].astype(int)
    tokens = [
        (s, end_q - start_q, end_k - start_k, start_k)
        for start_q, end_q, start_k, end_k in zip(starts_q, ends_q, starts_k, ends_k, strict=True)
        for s in range(end_q - start_q)
    ]
    rows = (
        a.astype(np.float64).reshape(shape)
        for a, shape in ((query, (-1, n1, d)), (key, (-1, d)), (weights, (-1, n1)))
    )
    return *rows, tokens


def lightning_indexer_oracle(
    query,
    key,
    weights,
    layout,
    sparse_mode,
    sparse_count,
    actual_seq_lengths_query=None,
    actual_seq_lengths_key=None,
):
    """(sparse_indices int32, sparse_values float64): per token the sparse_count allowed keys of
    its batch with the highest I = sum_j w_j relu(q_j . k), ties to the lower key, -1/0 past them."""
    q, k, w, tokens = _lightning_tokens(
        layout, query, key, weights, actual_seq_lengths_query, actual_seq_lengths_key
    )
    indices = np.full((len(tokens), sparse_count), -1, dtype=np.int32)
    values = np.zeros((len(tokens), sparse_count))
    for t, (s, s1, s2, first) in enumerate(tokens):
        allowed = s2 if sparse_mode == 0 else max(0, min(s2, s2 - s1 + s + 1))
        scores = np.maximum(q[t] @ k[first : first + allowed].T, 0).T @ w[t]
        best = sorted(range(allowed), key=lambda i: (-scores[i], i))[:sparse_count]
        indices[t, : len(best)] = best
        values[t, : len(best)] = scores[best]
    lead = query.shape[:-2]
    return indices.reshape(*lead, sparse_count), values.reshape(*lead, sparse_count)


def lightning_indexer_grad_oracle(
    query,
    key,
    dy,
    sparse_indices,
    weights,
    layout,
    sparse_mode,
    actual_seq_lengths_query=None,
    actual_seq_lengths_key=None,
):
    """(d_query, d_key, d_weights) in float64, slot by slot from the contract's formulas."""
    q, k, w, tokens = _lightning_tokens(
        layout, query, key, weights, actual_seq_lengths_query, actual_seq_lengths_key
    )
    top_k = dy.shape[-1]
    dy = dy.astype(np.float64).reshape(len(tokens), top_k)
    idx = sparse_indices.reshape(len(tokens), top_k)
    d_query, d_key, d_weights = np.zeros_like(q), np.zeros_like(k), np.zeros_like(w)
    for t, (s, s1, s2, first) in enumerate(tokens):
        k_t = top_k if sparse_mode == 0 else max(0, min(top_k, s2 - s1 + s + 1))
        for slot in range(k_t):
            if idx[t, slot] == -1:
                continue
            assert 0 <= idx[t, slot] < s2
            kv = k[first + idx[t, slot]]
            scores = q[t] @ kv  # one per head
            d_weights[t] += np.maximum(scores, 0) * dy[t, slot]
            g = np.where(scores > 0, w[t] * dy[t, slot], 0)
            d_query[t] += np.outer(g, kv)
            d_key[first + idx[t, slot]] += g @ q[t]
    return d_query.reshape(query.shape), d_key.reshape(key.shape), d_weights.reshape(weights.shape)


def lightning_indexer_grad_inputs(
    rng,
    layout,
    sparse_mode,
    dtype,
    index_dtype,
    batch=2,
    s1=5,
    s2=9,
    lengths_q=(3, 7),
    lengths_k=(4, 9),
    n1=3,
    d=8,
    k=4,
    lengths_dtype=np.int64,
    skip_fraction=0.2,
):
    """Random LightningIndexerGrad inputs: BSND [batch, s1|s2, ...], or TND with the cumulative
    lengths_q/lengths_k. Each token's valid slots hold distinct keys the sparse mode allows, in
    random order, with a skip_fraction of them -1; the slots past K_t hold -1."""
    if layout == "BSND":
        lead_q, lead_k, lengths = (batch, s1), (batch, s2, 1), {}
    else:
        lead_q, lead_k = (lengths_q[-1],), (lengths_k[-1], 1)
        lengths = {
            "actual_seq_lengths_query": np.array(lengths_q, dtype=lengths_dtype),
            "actual_seq_lengths_key": np.array(lengths_k, dtype=lengths_dtype),
        }
    query = rng.standard_normal((*lead_q, n1, d)).astype(dtype)
    key = rng.standard_normal((*lead_k, d)).astype(dtype)
    weights = rng.standard_normal((*lead_q, n1)).astype(dtype)
    *_, tokens = _lightning_tokens(layout, query, key, weights, **lengths)
    indices = np.full((len(tokens), k), -1, dtype=index_dtype)
    for t, (s, t_s1, t_s2, _) in enumerate(tokens):
        allowed = t_s2 if sparse_mode == 0 else max(0, min(t_s2, t_s2 - t_s1 + s + 1))
        chosen = rng.permutation(allowed)[:k]
        chosen[rng.random(len(chosen)) < skip_fraction] = -1
        indices[t, : len(chosen)] = chosen
    return {
        "query": query,
        "key": key,
        "dy": rng.standard_normal((*lead_q, k)).astype(dtype),
        "sparse_indices": indices.reshape(*lead_q, k),
        "weights": weights,
        **lengths,
    }


ADAMW_PAIRS = [(F32, F32), (F32, F16), (F32, BF16), (F16, F16), (BF16, BF16)]  # (TP, T)


def adam_w_oracle(
    param,
    exp_avg,
    exp_avg_sq,
    grad,
    step,
    lr,
    beta1=0.9,
    beta2=0.999,
    weight_decay=0.01,
    eps=1e-8,
    maximize=0,
):
    """torch.optim.AdamW's step (amsgrad off) in float64, each attribute the shortest decimal of
    the float32 the node holds (0.999, as torch has it)."""
    p, m, v, g = (a.astype(np.float64) for a in (param, exp_avg, exp_avg_sq, grad))
    b1, b2, wd, eps = (float(str(np.float32(a))) for a in (beta1, beta2, weight_decay, eps))
    t, lr = float(np.asarray(step).reshape(())), float(np.asarray(lr, np.float32).reshape(()))
    g = -g if maximize else g
    p = p * (1 - lr * wd)
    m = m + (1 - b1) * (g - m)
    v = v * b2 + (1 - b2) * g * g
    denom = np.sqrt(v) / np.sqrt(1 - b2**t) + eps
    return p - lr / (1 - b1**t) * m / denom, m, v


def adam_w_inputs(rng, shape, tp, t, step=3, lr=1e-2):
    """A parameter, its states after a few steps (exp_avg_sq >= 0), a gradient, step and lr."""
    return {
        "param": rng.standard_normal(shape).astype(tp),
        "exp_avg": (0.1 * rng.standard_normal(shape)).astype(tp),
        "exp_avg_sq": (0.01 * rng.random(shape)).astype(tp),
        "grad": rng.standard_normal(shape).astype(t),
        "step": np.array([step], np.int64),
        "lr": np.array([lr], np.float32),
    }


UNSCALE_TYPES = [F32, F16, BF16]


def unscale_oracle(scaled_grads, found_inf, inv_scale):
    """GradScaler.unscale_: the product in float64 rounded to the gradients' type, and the flag,
    1.0 where a gradient is an inf or a NaN, found_inf otherwise."""
    product = scaled_grads.astype(np.float64) * np.float64(inv_scale.reshape(()))
    bad = not np.all(np.isfinite(scaled_grads.astype(np.float64)))
    return product, np.full(found_inf.shape, 1.0) if bad else found_inf.astype(np.float64)


def unscale_inputs(rng, shape, t, found=0.0, scale=1024.0, poison=None):
    """Gradients of a loss scaled by ``scale`` (float16's range kept), the flag so far and a
    scale's inverse; ``poison`` (an inf or a NaN) put at one random element."""
    grads = np.asarray(rng.standard_normal(shape) * scale).astype(t)  # a 0-d array for shape ()
    if poison is not None and grads.size:
        grads.reshape(-1)[rng.integers(grads.size)] = poison
    # Not a power of two, so that the product rounds.
    inv = np.array([rng.uniform(0.5, 2.0) / scale], np.float32)
    return {"scaled_grads": grads, "found_inf": np.array([found], np.float32), "inv_scale": inv}


GLU_TYPES = [F32, F16, BF16]
GLU_SHAPES = [  # (x.shape, dim)
    ((2, 3, 64), -1),
    ((4, 6), 0),  # halves of one row each
    ((2, 8, 5), 1),  # a middle axis: each half strided by the trailing axes
    ((3, 2 * 333), -1),  # a half that is no multiple of the vector width
    ((0, 8), -1),  # empty
]


def _glu_halves(x, dim):
    a, b = np.split(x.astype(np.float64), 2, axis=dim)
    return a, b, 0.5 * (1.0 + np.tanh(a / 2))  # sigmoid, without exp overflowing


def swi_glu_oracle(x, dim=-1):
    a, b, s = _glu_halves(x, dim)
    return a * s * b


def swi_glu_grad_oracle(dy, x, dim=-1):
    a, b, s = _glu_halves(x, dim)
    g = dy.astype(np.float64)
    return np.concatenate([g * b * s * (1 + a * (1 - s)), g * a * s], axis=dim)


def swi_glu_grad_inputs(rng, x_shape, dim, t, scale=1.0):
    """x of normal values times ``scale`` and a dy of x's shape with x.shape[dim] halved."""
    x = (rng.standard_normal(x_shape) * scale).astype(t)
    dy_shape = list(x_shape)
    dy_shape[dim] //= 2
    return {"dy": rng.standard_normal(dy_shape).astype(t), "x": x}


FA_LAYOUTS = ["BSND", "BNSD", "BSH", "SBH", "TND"]


def fa_kv_heads(layout, query, key, head_num):
    """N2: key's heads (BSH/SBH: its hidden size over D = query's hidden size / head_num)."""
    if layout in ("BSH", "SBH"):
        return key.shape[-1] // (query.shape[-1] // head_num)
    return key.shape[1] if layout == "BNSD" else key.shape[-2]


def _fa_bounds(layout, tensor, lengths):
    """Per batch, (start, end) rows of a TND tensor or the batch index of the others."""
    if layout == "TND":
        ends = [int(e) for e in lengths]
        return list(zip([0, *ends[:-1]], ends, strict=True))
    return list(range(tensor.shape[1] if layout == "SBH" else tensor.shape[0]))


def fa_to_batches(layout, tensor, heads, lengths=None):
    """The tensor as a list of float64 [heads, S_b, dim] blocks, one per batch."""
    t = tensor.astype(np.float64)
    blocks = []
    for bound in _fa_bounds(layout, t, lengths):
        if layout == "TND":
            block = t[bound[0] : bound[1]].transpose(1, 0, 2)
        elif layout == "BNSD":
            block = t[bound]
        elif layout == "BSND":
            block = t[bound].transpose(1, 0, 2)
        else:
            rows = t[:, bound] if layout == "SBH" else t[bound]
            block = rows.reshape(rows.shape[0], heads, rows.shape[-1] // heads).transpose(1, 0, 2)
        blocks.append(block)
    return blocks


def fa_from_batches(layout, blocks, empty_shape):
    """Inverse of fa_to_batches: the [N, S_b, dim] blocks in the layout (``empty_shape`` when
    there is no batch)."""
    if not blocks:
        return np.zeros(empty_shape)
    if layout == "TND":
        return np.concatenate([b.transpose(1, 0, 2) for b in blocks]).reshape(-1, *blocks[0].shape[::2])
    if layout == "BNSD":
        return np.stack(blocks)
    if layout == "BSND":
        return np.stack([b.transpose(1, 0, 2) for b in blocks])
    merged = [b.transpose(1, 0, 2).reshape(b.shape[1], b.shape[0] * b.shape[2]) for b in blocks]
    return np.stack(merged, axis=1 if layout == "SBH" else 0)


def fa_allowed(s1, s2, sparse_mode, mask=None, pre_tokens=2**31 - 1, next_tokens=2**31 - 1):
    """[S1, S2] (or the mask's [N, S1, S2]) true where key k may be read by query row q."""
    q, k = np.arange(s1)[:, None], np.arange(s2)[None, :]
    if sparse_mode == 2:
        return k <= q
    if sparse_mode == 3:
        return k <= q + s2 - s1
    if mask is None:
        return np.ones((s1, s2), dtype=bool)
    band = (k >= q - pre_tokens) & (k <= q + next_tokens)
    return ~mask.astype(bool) & band


def _fa_batch_masks(atten_mask, batches):
    if atten_mask is None:
        return [None] * batches
    if atten_mask.ndim == 2:
        return [atten_mask] * batches
    return list(atten_mask)


def _fa_probabilities(qb, kb, allowed, scale):
    """P [N1, S1, S2] in float64 (rows with no allowed key all 0), and the row max and sum."""
    group = qb.shape[0] // kb.shape[0]
    scores = scale * np.einsum("nqd,nkd->nqk", qb, np.repeat(kb, group, axis=0))
    scores = np.where(allowed, scores, -np.inf)
    row_max = scores.max(axis=-1, initial=-np.inf)
    safe = np.where(np.isfinite(row_max), row_max, 0)[..., None]
    e = np.where(allowed, np.exp(scores - safe), 0)
    row_sum = e.sum(axis=-1)
    p = e / np.where(row_sum > 0, row_sum, 1)[..., None]
    return p, row_max, row_sum


def _fa_walk(
    query, key, value, head_num, input_layout, atten_mask, lengths_q, lengths_kv, sparse_mode, **band
):
    n2 = fa_kv_heads(input_layout, query, key, head_num)
    qs = fa_to_batches(input_layout, query, head_num, lengths_q)
    ks = fa_to_batches(input_layout, key, n2, lengths_kv)
    vs = fa_to_batches(input_layout, value, n2, lengths_kv)
    masks = _fa_batch_masks(atten_mask, len(qs))
    for qb, kb, vb, mb in zip(qs, ks, vs, masks, strict=True):
        yield qb, kb, vb, fa_allowed(qb.shape[1], kb.shape[1], sparse_mode, mb, **band)


def flash_attention_oracle(
    query,
    key,
    value,
    atten_mask=None,
    actual_seq_lengths_query=None,
    actual_seq_lengths_kv=None,
    *,
    head_num,
    input_layout="BSND",
    scale_value=1.0,
    sparse_mode=0,
    pre_tokens=2**31 - 1,
    next_tokens=2**31 - 1,
    keep_prob=1.0,
):
    """(attention_out, softmax_max, softmax_sum) in float64 from the contract's formulas."""
    outs, maxes, sums = [], [], []
    for qb, kb, vb, allowed in _fa_walk(
        query, key, value, head_num, input_layout, atten_mask,
        actual_seq_lengths_query, actual_seq_lengths_kv, sparse_mode,
        pre_tokens=pre_tokens, next_tokens=next_tokens,
    ):  # fmt: skip
        p, row_max, row_sum = _fa_probabilities(qb, kb, allowed, scale_value)
        outs.append(np.einsum("nqk,nkd->nqd", p, np.repeat(vb, qb.shape[0] // vb.shape[0], axis=0)))
        maxes.append(row_max)
        sums.append(row_sum)
    n2 = fa_kv_heads(input_layout, query, key, head_num)
    hidden = value.shape[-1] // n2 * head_num if input_layout in ("BSH", "SBH") else value.shape[-1]
    out = fa_from_batches(input_layout, outs, (*query.shape[:-1], hidden))
    return (out, *_fa_stats(input_layout, maxes, sums, head_num, query.shape))


def _fa_stats(layout, maxes, sums, head_num, query_shape):
    """[B, N1, S1, 8] (TND [T1, N1, 8]) from per-batch [N1, S1_b] rows."""
    if not maxes:
        s1 = query_shape[0] if layout == "SBH" else query_shape[1 if layout != "BNSD" else 2]
        return tuple(np.zeros((0, head_num, s1, 8)) for _ in range(2))
    if layout == "TND":
        stack = [np.concatenate([m.T for m in rows]) for rows in (maxes, sums)]
    else:
        stack = [np.stack(rows) for rows in (maxes, sums)]
    return tuple(np.repeat(s[..., None], 8, axis=-1) for s in stack)


def flash_attention_grad_oracle(
    query,
    key,
    value,
    dy,
    atten_mask=None,
    softmax_max=None,
    softmax_sum=None,
    attention_in=None,
    actual_seq_lengths_query=None,
    actual_seq_lengths_kv=None,
    *,
    head_num,
    input_layout="BSND",
    scale_value=1.0,
    sparse_mode=0,
    pre_tokens=2**31 - 1,
    next_tokens=2**31 - 1,
    keep_prob=1.0,
):
    """(dq, dk, dv) in float64 from the schema's formulas: the probabilities recomputed exactly
    (the statistics given are taken to be the forward's), Drow from attention_in as given (the
    forward's output rounded to T, as the op reads it; recomputed when absent)."""
    dys = fa_to_batches(input_layout, dy, head_num, actual_seq_lengths_query)
    given = [None] * len(dys)
    if attention_in is not None:
        given = fa_to_batches(input_layout, attention_in, head_num, actual_seq_lengths_query)
    dqs, dks, dvs = [], [], []
    for (qb, kb, vb, allowed), dyb, outb in zip(
        _fa_walk(
            query, key, value, head_num, input_layout, atten_mask,
            actual_seq_lengths_query, actual_seq_lengths_kv, sparse_mode,
            pre_tokens=pre_tokens, next_tokens=next_tokens,
        ),
        dys,
        given,
        strict=True,
    ):  # fmt: skip
        group = qb.shape[0] // kb.shape[0]
        kr, vr = np.repeat(kb, group, axis=0), np.repeat(vb, group, axis=0)
        p, _, _ = _fa_probabilities(qb, kb, allowed, scale_value)
        out = np.einsum("nqk,nkd->nqd", p, vr) if outb is None else outb
        dp = np.einsum("nqd,nkd->nqk", dyb, vr)
        ds = p * (dp - (dyb * out).sum(axis=-1, keepdims=True))
        dqs.append(scale_value * np.einsum("nqk,nkd->nqd", ds, kr))
        per_head_dk = scale_value * np.einsum("nqk,nqd->nkd", ds, qb)
        per_head_dv = np.einsum("nqk,nqd->nkd", p, dyb)
        dks.append(per_head_dk.reshape(kb.shape[0], group, *kb.shape[1:]).sum(axis=1))
        dvs.append(per_head_dv.reshape(vb.shape[0], group, *vb.shape[1:]).sum(axis=1))
    return tuple(
        fa_from_batches(input_layout, blocks, like.shape)
        for blocks, like in ((dqs, query), (dks, key), (dvs, value))
    )


def flash_attention_inputs(
    rng,
    layout,
    dtype,
    *,
    batch=2,
    n1=4,
    n2=2,
    s1=5,
    s2=7,
    d=8,
    dv=None,
    lengths_q=(3, 7),
    lengths_kv=(4, 9),
    lengths_dtype=np.int64,
    mask=None,
    mask_dtype=np.bool_,
    grad=False,
    **attrs,
):
    """(inputs, attributes) of a random FlashAttentionScore call, or of its grad (with the
    forward's outputs from the oracle, rounded as the forward's types are). ``mask``: None,
    "2d" ([S1, S2]), "b1" ([B, 1, S1, S2]) or "bn" ([B, N1, S1, S2]); a masked fraction of 30%.
    ``attrs`` are the op's attributes beside head_num and input_layout."""
    dv = d if dv is None else dv
    lengths = {}
    if layout == "TND":
        batch, s1, s2 = len(lengths_q), lengths_q[-1], lengths_kv[-1]
        shapes = [(s1, n1, d), (s2, n2, d), (s2, n2, dv)]
        lengths = {
            "actual_seq_lengths_query": np.array(lengths_q, dtype=lengths_dtype),
            "actual_seq_lengths_kv": np.array(lengths_kv, dtype=lengths_dtype),
        }
    elif layout == "BSND":
        shapes = [(batch, s1, n1, d), (batch, s2, n2, d), (batch, s2, n2, dv)]
    elif layout == "BNSD":
        shapes = [(batch, n1, s1, d), (batch, n2, s2, d), (batch, n2, s2, dv)]
    elif layout == "BSH":
        shapes = [(batch, s1, n1 * d), (batch, s2, n2 * d), (batch, s2, n2 * dv)]
    else:
        shapes = [(s1, batch, n1 * d), (s2, batch, n2 * d), (s2, batch, n2 * dv)]
    query, key, value = (rng.standard_normal(s).astype(dtype) for s in shapes)
    inputs = {"query": query, "key": key, "value": value}
    if mask is not None:
        mask_shape = {"2d": (s1, s2), "b1": (batch, 1, s1, s2), "bn": (batch, n1, s1, s2)}[mask]
        inputs["atten_mask"] = (rng.random(mask_shape) < 0.3).astype(mask_dtype)
    inputs.update(lengths)
    attributes = {"head_num": n1, "input_layout": layout, "scale_value": 1 / np.sqrt(d), **attrs}
    if not grad:
        return inputs, attributes
    out, row_max, row_sum = flash_attention_oracle(**inputs, **attributes)
    grad_inputs = {
        "query": query,
        "key": key,
        "value": value,
        "dy": rng.standard_normal(out.shape).astype(dtype),
    }
    if "atten_mask" in inputs:
        grad_inputs["atten_mask"] = inputs["atten_mask"]
    grad_inputs |= {
        "softmax_max": row_max.astype(np.float32),
        "softmax_sum": row_sum.astype(np.float32),
        "attention_in": out.astype(dtype),
        **lengths,
    }
    return grad_inputs, attributes


GMM_TYPES = [F32, F16, BF16]
GMM_CASES = [  # (counts, K, N)
    ((5, 0, 12, 3), 16, 24),
    ((300, 1, 0, 260), 40, 530),  # groups cut in row and column blocks; an empty group between
    ((0, 0, 0), 8, 4),  # no rows at all
    ((7, 2), 0, 5),  # K = 0: y is zeros
    ((1,) * 9, 3, 1),  # one row per group
]


def grouped_matmul_inputs(rng, counts, k, n, t, transpose_weight=0):
    """x [M, K], weight [E, K, N] (or [E, N, K]), dy [M, N] and group_list for `counts`."""
    m, e = sum(counts), len(counts)
    shape = (e, n, k) if transpose_weight else (e, k, n)
    return {
        "x": rng.standard_normal((m, k)).astype(t),
        "weight": (rng.standard_normal(shape) / max(k, 1) ** 0.5).astype(t),
        "dy": rng.standard_normal((m, n)).astype(t),
        "group_list": np.array(counts, np.int64),
    }


def _group_bounds(group_list):
    return np.concatenate([[0], np.cumsum(group_list)]).astype(np.int64)


def grouped_matmul_oracle(x, weight, group_list, transpose_weight=0):
    w = weight.astype(np.float64)
    if transpose_weight:
        w = w.transpose(0, 2, 1)
    b = _group_bounds(group_list)
    y = np.zeros((x.shape[0], w.shape[2]))
    for g in range(len(group_list)):
        y[b[g] : b[g + 1]] = x[b[g] : b[g + 1]].astype(np.float64) @ w[g]
    return y


def grouped_matmul_weight_grad_oracle(x, dy, group_list, transpose_weight=0):
    b = _group_bounds(group_list)
    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    grads = np.zeros((len(group_list), x.shape[1], dy.shape[1]))
    for g in range(len(group_list)):
        grads[g] = x64[b[g] : b[g + 1]].T @ dy64[b[g] : b[g + 1]]
    return grads.transpose(0, 2, 1) if transpose_weight else grads
