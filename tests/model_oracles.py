"""Independent float64 NumPy forward and hand-written backprop of the example models
(``ort_ascend_ops.examples``), written from the models' formulas, not from their graphs."""

from __future__ import annotations

import numpy as np


def _f64(inputs):
    return {name: np.asarray(a, dtype=np.float64) if a.dtype.kind == "f" else a for name, a in inputs.items()}


def relative_error(out, ref) -> float:
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-300))


def tensors_distance(ours: dict, theirs: dict, start: dict | None = None) -> float:
    """``relative_error`` over every tensor of ``theirs`` taken as one vector (None values, which
    torch gives a parameter no gradient reaches, left out); relative to ``theirs - start`` when
    ``start`` is given (how far a run moved the parameters)."""
    names = [n for n, t in theirs.items() if t is not None]
    apart = sum(float(np.sum((np.asarray(ours[n], np.float64) - theirs[n]) ** 2)) for n in names)
    base = {n: np.asarray(theirs[n], np.float64) - (0 if start is None else start[n]) for n in names}
    return (apart / max(sum(float(np.sum(b**2)) for b in base.values()), 1e-300)) ** 0.5


# Llama-style block ------------------------------------------------------------------------------


def _rms_norm(x, gamma, eps):
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * rstd * gamma, rstd


def _rms_norm_backward(dy, x, rstd, gamma):
    xhat = x * rstd
    g = dy * gamma
    dx = rstd * (g - xhat * np.mean(g * xhat, axis=-1, keepdims=True))
    return dx, np.sum(dy * xhat, axis=tuple(range(x.ndim - 1)))


def _rotate_half(x):  # RoPE mode 0: cat(-x2, x1)
    x1, x2 = np.split(x, 2, axis=-1)
    return np.concatenate([-x2, x1], axis=-1)


def _rotate_half_transposed(g):  # the adjoint of _rotate_half: cat(g2, -g1)
    g1, g2 = np.split(g, 2, axis=-1)
    return np.concatenate([g2, -g1], axis=-1)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def llama_block_forward(inputs, eps=1e-6):
    """The loss and the activations the backward needs. Causal masking drops the keys after the
    query (the graph's -1e9 mask gives them exactly zero weight in float32)."""
    v = _f64(inputs)
    x, cos, sin = v["x"], v["cos"], v["sin"]
    B, S, H = x.shape
    Dh = cos.shape[-1]
    N = H // Dh
    scale = Dh**-0.5

    xn, r1 = _rms_norm(x, v["attn_norm"], eps)
    q = (xn @ v["wq"]).reshape(B, S, N, Dh)
    k = (xn @ v["wk"]).reshape(B, S, N, Dh)
    val = (xn @ v["wv"]).reshape(B, S, N, Dh)
    qr = q * cos + _rotate_half(q) * sin
    kr = k * cos + _rotate_half(k) * sin
    scores = np.einsum("bind,bjnd->bnij", qr, kr) * scale
    causal = np.tril(np.ones((S, S), dtype=bool))
    scores = np.where(causal, scores, -np.inf)
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    context = np.einsum("bnij,bjnd->bind", probs, val).reshape(B, S, H)
    h = x + context @ v["wo"]

    hn, r2 = _rms_norm(h, v["mlp_norm"], eps)
    gate, up = hn @ v["w_gate"], hn @ v["w_up"]
    sig = _sigmoid(gate)
    act = gate * sig * up
    out = h + act @ v["w_down"]
    diff = out - v["target"]
    loss = np.mean(diff * diff)
    cache = dict(
        v=v, xn=xn, r1=r1, qr=qr, kr=kr, val=val, probs=probs, context=context, h=h, hn=hn, r2=r2,
        gate=gate, up=up, sig=sig, act=act, diff=diff, scale=scale,
    )  # fmt: skip
    return loss, cache


def llama_block_backward(cache):
    """Gradients of the loss w.r.t. every weight, by hand."""
    c = cache
    v = c["v"]
    B, S, H = c["h"].shape
    N, Dh = c["qr"].shape[2:]

    def outer(a, g):  # d(a @ w)/dw contracted with g, summed over batch and sequence
        return np.einsum("bsi,bso->io", a, g)

    grads = {}
    dout = 2.0 * c["diff"] / c["diff"].size
    # MLP: out = h + act @ w_down, act = silu(gate) * up.
    grads["w_down"] = outer(c["act"], dout)
    dact = dout @ v["w_down"].T
    gate, sig, up = c["gate"], c["sig"], c["up"]
    dgate = dact * up * (sig + gate * sig * (1.0 - sig))
    dup = dact * gate * sig
    grads["w_gate"] = outer(c["hn"], dgate)
    grads["w_up"] = outer(c["hn"], dup)
    dhn = dgate @ v["w_gate"].T + dup @ v["w_up"].T
    dh_norm, grads["mlp_norm"] = _rms_norm_backward(dhn, c["h"], c["r2"], v["mlp_norm"])
    dh = dout + dh_norm
    # Attention: h = x + context @ wo.
    grads["wo"] = outer(c["context"], dh)
    dcontext = (dh @ v["wo"].T).reshape(B, S, N, Dh)
    probs = c["probs"]
    dprobs = np.einsum("bind,bjnd->bnij", dcontext, c["val"])
    dval = np.einsum("bnij,bind->bjnd", probs, dcontext)
    dscores = probs * (dprobs - np.sum(dprobs * probs, axis=-1, keepdims=True)) * c["scale"]
    dqr = np.einsum("bnij,bjnd->bind", dscores, c["kr"])
    dkr = np.einsum("bnij,bind->bjnd", dscores, c["qr"])
    # RoPE: y = x cos + R(x) sin, so dx = dy cos + R^T(dy sin).
    cos, sin = v["cos"], v["sin"]
    dq = (dqr * cos + _rotate_half_transposed(dqr * sin)).reshape(B, S, H)
    dk = (dkr * cos + _rotate_half_transposed(dkr * sin)).reshape(B, S, H)
    dv = dval.reshape(B, S, H)
    grads["wq"], grads["wk"], grads["wv"] = outer(c["xn"], dq), outer(c["xn"], dk), outer(c["xn"], dv)
    dxn = dq @ v["wq"].T + dk @ v["wk"].T + dv @ v["wv"].T
    _, grads["attn_norm"] = _rms_norm_backward(dxn, v["x"], c["r1"], v["attn_norm"])
    return grads


# DeepSeek indexer loss --------------------------------------------------------------------------


def indexer_scores(query, key, weights):
    """``I[b, t, s] = sum_j w[b,t,j] relu(q[b,t,j] . k[b,s])`` for every key (no masking)."""
    dots = np.einsum("btjd,bsd->btjs", query, key[:, :, 0, :])
    return np.einsum("btj,btjs->bts", weights, np.maximum(dots, 0.0)), dots


def indexer_selection(scores, top_k):
    """sparse_mode 3 top-k: token t of S1 may see keys s <= S2 - S1 + t; the best K in descending
    score, ties to the lower key; -1 past the allowed keys."""
    B, S1, S2 = scores.shape
    idx = np.full((B, S1, top_k), -1, dtype=np.int64)
    for b in range(B):
        for t in range(S1):
            allowed = max(min(S2, S2 - S1 + t + 1), 0)
            order = np.argsort(-scores[b, t, :allowed], kind="stable")[:top_k]
            idx[b, t, : len(order)] = order
    return idx


def indexer_loss_forward(inputs, top_k, selection=None):
    """The loss ``sum_t KL(p_t || softmax(selected scores))`` over the valid slots, and what the
    backward needs. ``selection`` fixes the selected keys (else they are chosen here)."""
    v = _f64(inputs)
    scores, dots = indexer_scores(v["query"], v["key"], v["weights"])
    idx = indexer_selection(scores, top_k) if selection is None else np.asarray(selection, np.int64)
    valid = idx >= 0
    picked = np.take_along_axis(scores, np.where(valid, idx, 0), axis=-1)
    # log softmax over the valid slots only (every token has at least one).
    top = np.max(np.where(valid, picked, -np.inf), axis=-1, keepdims=True)
    e = np.where(valid, np.exp(np.where(valid, picked - top, 0.0)), 0.0)
    q = e / e.sum(axis=-1, keepdims=True)
    log_q = np.where(valid, picked - top - np.log(e.sum(axis=-1, keepdims=True)), 0.0)
    p = np.where(valid, v["p"], 0.0)
    entropy = p * np.log(np.where(p > 0, p, 1.0))
    loss = float(np.sum(entropy - p * log_q))
    return loss, dict(v=v, dots=dots, idx=idx, valid=valid, q=q, p=p)


def indexer_loss_backward(cache):
    """Gradients w.r.t. query, key and weights: ``dI = softmax * sum(p) - p`` on the valid slots,
    then through ``I = sum_j w_j relu(q_j . k)`` for the selected keys."""
    v, dots, idx, valid = cache["v"], cache["dots"], cache["idx"], cache["valid"]
    p = cache["p"]
    d_selected = np.where(valid, cache["q"] * p.sum(axis=-1, keepdims=True) - p, 0.0)
    query, key, weights = v["query"], v["key"], v["weights"]
    dq, dk, dw = np.zeros_like(query), np.zeros_like(key), np.zeros_like(weights)
    B, S1, K = idx.shape
    for b in range(B):
        for t in range(S1):
            for slot in range(K):
                if not valid[b, t, slot]:
                    continue
                s, g = idx[b, t, slot], d_selected[b, t, slot]
                d = dots[b, t, :, s]  # [N1]
                dw[b, t] += g * np.maximum(d, 0.0)
                g_heads = np.where(d > 0, g * weights[b, t], 0.0)  # [N1]
                dq[b, t] += g_heads[:, None] * key[b, s, 0][None, :]
                dk[b, s, 0] += g_heads @ query[b, t]
    return {"query": dq, "key": dk, "weights": dw}
