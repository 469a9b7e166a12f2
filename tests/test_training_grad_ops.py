"""Gradient rules that emit this package's grad ops (RmsNorm, RotaryPositionEmbedding,
LightningIndexer, FlashAttentionScore, and the standard RMSNormalization and RotaryEmbedding): every `<name>_grad` of
small training models against float64 NumPy oracles written from the formulas, against central
finite differences of the forward loss, on the native and the portable path, and through the
checker and strict shape inference. The loss is sum(y * R), so dL/dy = R."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference.ops.op_rotary_embedding import rotary_embedding as onnx_rotary_embedding

from oracles import (
    BF16,
    F16,
    F32,
    PAIRS,
    TOL,
    assert_close,
    flash_attention_grad_oracle,
    flash_attention_inputs,
    lightning_indexer_grad_inputs,
    lightning_indexer_grad_oracle,
    lightning_indexer_oracle,
    pair_id,
    rms_norm_grad_oracle,
    rms_norm_oracle,
    rope_grad_oracle,
    rope_oracle,
)
from ort_ascend_ops import DOMAIN, OPSET_VERSION, make_session
from ort_ascend_ops.training import GradientError, build_training_model

# Sums over many rows in half types lose more than one rounding (dgamma, dcos, dsin).
SUM_TOL = {F32: 1e-5, F16: 4e-3, BF16: 2e-2}


# Models and runs.
def _info(name, dtype, shape):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)


def loss_model(nodes, feeds, out, out_dtype, extra=None):
    """The forward model: ``nodes`` compute ``out`` from the graph inputs ``feeds`` (name -> array,
    which give their types and shapes; "R" is the float32 weight of the loss), then
    loss = ReduceSum(Cast(out, float) * R). ``extra`` (name -> dtype) are more outputs, for checks."""
    nodes = list(nodes)
    if out_dtype != F32:  # CPU Mul/ReduceSum take no bfloat16: sum in float32
        nodes.append(helper.make_node("Cast", [out], [f"{out}_f32"], to=TensorProto.FLOAT))
        out = f"{out}_f32"
    nodes += [
        helper.make_node("Mul", [out, "R"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted"], ["loss"], keepdims=0),
    ]
    outputs = [_info("loss", F32, [])] + [_info(n, d, None) for n, d in (extra or {}).items()]
    graph = helper.make_graph(
        nodes, "forward", [_info(n, a.dtype, a.shape) for n, a in feeds.items()], outputs
    )
    opsets = [helper.make_opsetid("", 23), helper.make_opsetid(DOMAIN, OPSET_VERSION)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def train(model, wrt, fuse=True):
    """The training model, checked: checker, strict shape inference, one `<name>_grad` output per
    wrt value with the value's type and shape."""
    training = build_training_model(model, "loss", wrt, fuse=fuse)
    onnx.checker.check_model(training)
    onnx.shape_inference.infer_shapes(training, strict_mode=True)
    types = {i.name: i.type for i in model.graph.input}
    assert [o.name for o in training.graph.output] == ["loss"] + [f"{w}_grad" for w in wrt]
    for name, output in zip(wrt, training.graph.output[1:], strict=True):
        assert output.type == types[name], name
    return training


def run(model, feeds, native=True):
    session = make_session(model, native=native)
    return dict(zip(session.output_names, session.run(feeds), strict=True))


def grads_of(training, feeds, native=True):
    """The `<name>_grad` outputs, each checked to have its value's dtype and shape."""
    out = run(training, feeds, native)
    grads = {name[: -len("_grad")]: value for name, value in out.items() if name.endswith("_grad")}
    for name, grad in grads.items():
        assert grad.dtype == feeds[name].dtype and grad.shape == feeds[name].shape, name
    return grads


def assert_paths_agree(training, feeds, grads, tols):
    """The portable path (the inlined reference functions) gives the native grads."""
    portable = grads_of(training, feeds, native=False)
    for name, grad in grads.items():
        assert_close(portable[name], grad.astype(np.float64), tols[name])


def assert_finite_differences(forward, feeds, grads, rng, h, rtol, stable=None):
    """Central differences of the forward loss per gradient, along a random direction and along
    the gradient itself: with d = x_plus - x_minus (as rounded to float32),
    L(x_plus) - L(x_minus) = <grad, d> + O(|d|^3). ``stable`` names a forward output that must
    not change (the indexer's selection)."""
    session = make_session(forward)
    names = ["loss"] + ([stable] if stable else [])

    def loss(inputs):
        values = session.run(inputs, names)
        return values[0].astype(np.float64), values[1:]

    _, base = loss(feeds)
    for name, grad in grads.items():
        grad = grad.astype(np.float64)
        for v in (rng.standard_normal(grad.shape), grad):
            v = v * (h / np.linalg.norm(v))
            plus, minus = (dict(feeds, **{name: (feeds[name] + s * v).astype(np.float32)}) for s in (1, -1))
            (l_plus, picked_plus), (l_minus, picked_minus) = loss(plus), loss(minus)
            for picked in (picked_plus, picked_minus):
                assert all(np.array_equal(a, b) for a, b in zip(picked, base, strict=True)), (
                    "selection changed"
                )
            d = plus[name].astype(np.float64) - minus[name]
            err = abs(l_plus - l_minus - np.sum(grad * d))
            assert err <= rtol * np.linalg.norm(grad) * np.linalg.norm(d), f"{name}: {err:.3g}"


def nodes_of(training, op_type):
    return [n for n in training.graph.node if n.op_type == op_type]


def loss_weights(rng, shape, t):
    """The loss weight R: float32 values that t represents exactly, so that dL/dy = R in t."""
    return rng.standard_normal(shape).astype(t).astype(np.float32)


# RmsNorm.
def rms_norm_model(feeds, named_rstd):
    """RmsNorm with its rstd output named, or left out (the rule then names it)."""
    outputs = ["y", "rstd"] if named_rstd else ["y"]
    node = helper.make_node("RmsNorm", ["x", "gamma"], outputs, domain=DOMAIN, epsilon=1e-6)
    return loss_model([node], feeds, "y", feeds["x"].dtype)


@pytest.mark.parametrize("shapes", [((2, 3, 16), (16,)), ((2, 3, 4, 8), (4, 8))], ids=["g1", "g2"])
@pytest.mark.parametrize("named_rstd", [True, False], ids=["rstd", "no-rstd"])
@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_rms_norm(pair, named_rstd, shapes, rng):
    (t, tg), (x_shape, g_shape) = pair, shapes
    x, gamma = rng.standard_normal(x_shape).astype(t), rng.standard_normal(g_shape).astype(tg)
    feeds = {"x": x, "gamma": gamma, "R": loss_weights(rng, x_shape, t)}
    forward = rms_norm_model(feeds, named_rstd)
    training = train(forward, ["x", "gamma"])
    (node,) = nodes_of(training, "RmsNormGrad")
    forward_rstd = next(n for n in training.graph.node if n.op_type == "RmsNorm").output[1]
    assert node.input[2] == forward_rstd and (forward_rstd == "rstd" or not named_rstd)
    # dgamma comes out of RmsNormGrad in float32: cast to gamma's type only when that differs.
    casts = [n for n in nodes_of(training, "Cast") if n.input[0] == node.output[1]]
    assert len(casts) == (tg != F32)

    grads = grads_of(training, feeds)
    rstd = rms_norm_oracle(x, gamma, 1e-6)[1]
    dx, dgamma = rms_norm_grad_oracle(feeds["R"], x, rstd, gamma)
    assert_close(grads["x"], dx, TOL[t])
    assert_close(grads["gamma"], dgamma, max(SUM_TOL[t], TOL[tg]))
    assert_paths_agree(training, feeds, grads, {"x": TOL[t], "gamma": TOL[tg]})
    if t == tg == F32 and named_rstd:
        assert_finite_differences(forward, feeds, grads, rng, h=1e-2, rtol=2e-4)


def test_rms_norm_gamma_only(rng):
    x, gamma = rng.standard_normal((3, 8)).astype(BF16), rng.standard_normal(8).astype(BF16)
    feeds = {"x": x, "gamma": gamma, "R": loss_weights(rng, (3, 8), BF16)}
    grads = grads_of(train(rms_norm_model(feeds, False), ["gamma"]), feeds)
    rstd = rms_norm_oracle(x, gamma, 1e-6)[1]
    assert_close(grads["gamma"], rms_norm_grad_oracle(feeds["R"], x, rstd, gamma)[1], SUM_TOL[BF16])


def test_rms_norm_gradient_through_rstd_is_refused(rng):
    x, gamma = rng.standard_normal((3, 8)).astype(F32), rng.standard_normal(8).astype(F32)
    node = helper.make_node("RmsNorm", ["x", "gamma"], ["y", "rstd"], domain=DOMAIN, name="norm")
    feeds = {"x": x, "gamma": gamma, "R": loss_weights(rng, (3, 8), F32)}
    forward = loss_model([node, helper.make_node("Add", ["y", "rstd"], ["z"])], feeds, "z", F32)
    with pytest.raises(GradientError, match="RmsNorm node 'norm'.*rstd"):
        build_training_model(forward, "loss", ["x"])


# RotaryPositionEmbedding.
# (name, x shape, cos shape): tables shared by the batch (11SD) or per batch (BS1D).
ROPE_CASES = [("BNSD-11SD", (2, 3, 4, 16), (1, 1, 4, 16)), ("BSND-BS1D", (2, 4, 3, 16), (2, 4, 1, 16))]


def rope_model(feeds, mode):
    node = helper.make_node("RotaryPositionEmbedding", ["x", "cos", "sin"], ["y"], domain=DOMAIN, mode=mode)
    return loss_model([node], feeds, "y", feeds["x"].dtype)


@pytest.mark.parametrize("tables", [False, True], ids=["dx", "dx-dcos-dsin"])
@pytest.mark.parametrize("case", ROPE_CASES, ids=lambda c: c[0])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("t", [F32, F16, BF16], ids=lambda t: t.name)
def test_rotary_position_embedding(t, mode, case, tables, rng):
    _, x_shape, cos_shape = case
    feeds = {
        "x": rng.standard_normal(x_shape).astype(t),
        "cos": rng.standard_normal(cos_shape).astype(t),
        "sin": rng.standard_normal(cos_shape).astype(t),
        "R": loss_weights(rng, x_shape, t),
    }
    wrt = ["x", "cos", "sin"] if tables else ["x"]
    forward = rope_model(feeds, mode)
    training = train(forward, wrt)
    # x goes to the grad op only when dcos/dsin are wanted; every slot is listed.
    (node,) = nodes_of(training, "RotaryPositionEmbeddingGrad")
    assert len(node.input) == 4 and bool(node.input[3]) == tables and len(node.output) == 3
    assert [bool(o) for o in node.output] == [True, tables, tables]

    grads = grads_of(training, feeds)
    ref = rope_grad_oracle(feeds["R"], feeds["cos"], feeds["sin"], feeds["x"], mode)
    assert_close(grads["x"], ref[0], TOL[t])
    if tables:
        assert_close(grads["cos"], ref[1], SUM_TOL[t])
        assert_close(grads["sin"], ref[2], SUM_TOL[t])
    # Stock ONNX Runtime cannot run a bfloat16 RotaryPositionEmbeddingGrad given x (its
    # reference tests x with OptionalHasElement, which takes no bfloat16 before opset 28).
    if not (t == BF16 and tables):
        assert_paths_agree(training, feeds, grads, dict.fromkeys(wrt, TOL[t]))
    if t == F32 and mode in (0, 1):
        assert_finite_differences(forward, feeds, grads, rng, h=1e-2, rtol=2e-4)


def test_rotary_position_embedding_tables_only(rng):
    """Only sin needs a gradient: x still goes to the grad op, and dx is computed but not asked for."""
    case = ROPE_CASES[1]
    feeds = {
        n: rng.standard_normal(case[1] if n == "x" else case[2]).astype(F32) for n in ("x", "cos", "sin")
    }
    feeds["R"] = loss_weights(rng, case[1], F32)
    training = train(rope_model(feeds, 0), ["sin"])
    (node,) = nodes_of(training, "RotaryPositionEmbeddingGrad")
    assert node.input[3] == "x"
    ref = rope_grad_oracle(feeds["R"], feeds["cos"], feeds["sin"], feeds["x"], 0)
    assert_close(grads_of(training, feeds)["sin"], ref[2], SUM_TOL[F32])


# LightningIndexer.
def indexer_model(feeds, layout, sparse_mode, k, query_shape=None, then=(), out="values"):
    """The indexer's forward model; ``then`` are more nodes, computing ``out`` for the loss."""
    inputs = ["query", "key", "weights"] + (
        ["actual_seq_lengths_query", "actual_seq_lengths_key"] if layout == "TND" else []
    )
    node = helper.make_node(
        "LightningIndexer",
        inputs,
        ["indices", "values"],
        domain=DOMAIN,
        name="indexer",
        layout=layout,
        sparse_mode=sparse_mode,
        sparse_count=k,
    )
    model = loss_model([node, *then], feeds, out, feeds["query"].dtype, {"indices": np.int32})
    if query_shape is not None:  # a query whose head axis has no static size
        query = model.graph.input[0].type.tensor_type.shape
        query.CopyFrom(helper.make_tensor_type_proto(1, query_shape).tensor_type.shape)
    return model


def indexer_feeds(rng, layout, t, k):
    inputs = lightning_indexer_grad_inputs(rng, layout, 3, t, np.int32, s1=4, s2=6, n1=2, d=8, k=k)
    feeds = {n: inputs[n] for n in ("query", "key", "weights")}
    if layout == "TND":
        feeds.update({n: inputs[n] for n in ("actual_seq_lengths_query", "actual_seq_lengths_key")})
    feeds["R"] = loss_weights(rng, inputs["dy"].shape, t)
    return feeds


@pytest.mark.parametrize("sparse_mode", [0, 3])
@pytest.mark.parametrize("layout", ["BSND", "TND"])
@pytest.mark.parametrize("t", [F32, BF16], ids=lambda t: t.name)
def test_lightning_indexer(t, layout, sparse_mode, rng):
    k = 3
    feeds = indexer_feeds(rng, layout, t, k)
    forward = indexer_model(feeds, layout, sparse_mode, k)
    wrt = ["query", "key", "weights"]
    training = train(forward, wrt)
    (node,) = nodes_of(training, "LightningIndexerGrad")
    assert node.input[3] == "indices"  # the forward's selection, reused
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs == {"head_num": 2, "layout": layout.encode(), "sparse_mode": sparse_mode}

    lengths = {n: feeds[n] for n in ("actual_seq_lengths_query", "actual_seq_lengths_key") if n in feeds}
    data = [feeds[n] for n in ("query", "key", "weights")]
    indices = run(forward, feeds)["indices"]
    assert np.array_equal(indices, lightning_indexer_oracle(*data, layout, sparse_mode, k, **lengths)[0])
    grads = grads_of(training, feeds)
    ref = lightning_indexer_grad_oracle(
        feeds["query"], feeds["key"], feeds["R"], indices, feeds["weights"], layout, sparse_mode, **lengths
    )
    for name, expected in zip(wrt, ref, strict=True):
        assert_close(grads[name], expected, TOL[t])
    assert_paths_agree(training, feeds, grads, dict.fromkeys(wrt, TOL[t]))
    if t == F32:
        # Tiny steps, so that no score crosses a ReLU kink or changes the selection.
        assert_finite_differences(forward, feeds, grads, rng, h=1e-3, rtol=5e-4, stable="indices")


INDICES_USES = {  # loss terms that read the int32 indices: (nodes, output)
    "cast-add": (
        [
            helper.make_node("Cast", ["indices"], ["indices_f"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["values", "indices_f"], ["mixed"]),
        ],
        "mixed",
    ),
    "mask": (  # the -1 slots masked out, as an indexer loss does
        [
            helper.make_node("Constant", [], ["minus_one"], value_int=-1),
            helper.make_node("Cast", ["minus_one"], ["minus_one_i32"], to=TensorProto.INT32),
            helper.make_node("Equal", ["indices", "minus_one_i32"], ["empty"]),
            helper.make_node("Constant", [], ["zero"], value_float=0.0),
            helper.make_node("Where", ["empty", "zero", "values"], ["mixed"]),
        ],
        "mixed",
    ),
}


@pytest.mark.parametrize("use", INDICES_USES)
def test_lightning_indexer_gradient_of_indices_is_ignored(use, rng):
    """A loss that also reads the (int32) indices gets the same gradients: no gradient flows
    through them, and ops on them need no rule."""
    feeds = indexer_feeds(rng, "BSND", F32, 3)
    plain = train(indexer_model(feeds, "BSND", 3, 3), ["query"])
    then, out = INDICES_USES[use]
    training = train(indexer_model(feeds, "BSND", 3, 3, then=then, out=out), ["query"])
    assert_close(grads_of(training, feeds)["query"], grads_of(plain, feeds)["query"].astype(np.float64), 0)


def test_lightning_indexer_needs_static_head_count(rng):
    feeds = indexer_feeds(rng, "BSND", F32, 3)
    forward = indexer_model(feeds, "BSND", 3, 3, query_shape=[2, 4, "heads", 8])
    with pytest.raises(GradientError, match="LightningIndexer node 'indexer'.*head"):
        build_training_model(forward, "loss", ["query"])


# RMSNormalization (standard, opset 23) -> RmsNorm.
RMS_NORMALIZATION_CASES = [  # (x shape, axis, scale shape)
    ((2, 3, 16), -1, (16,)),
    ((2, 3, 4, 8), 2, (4, 8)),
    ((2, 3, 4, 8), -2, (4, 8)),
]


def rms_normalization_model(feeds, axis, epsilon=None):
    attrs = {"axis": axis} | ({} if epsilon is None else {"epsilon": epsilon})
    node = helper.make_node("RMSNormalization", ["x", "scale"], ["y"], name="rmsn", **attrs)
    return loss_model([node], feeds, "y", feeds["x"].dtype)


# Fused first (ort_ascend_ops.fuse), or through the standard op's own rule.
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "rule"])
@pytest.mark.parametrize("epsilon", [None, 1e-3], ids=["eps-default", "eps"])
@pytest.mark.parametrize("case", RMS_NORMALIZATION_CASES, ids=lambda c: f"axis{c[1]}")
@pytest.mark.parametrize("t", [F32, F16, BF16], ids=lambda t: t.name)
def test_rms_normalization(t, case, epsilon, fuse, rng):
    x_shape, axis, scale_shape = case
    x, scale = rng.standard_normal(x_shape).astype(t), rng.standard_normal(scale_shape).astype(t)
    feeds = {"x": x, "scale": scale, "R": loss_weights(rng, x_shape, t)}
    forward = rms_normalization_model(feeds, axis, epsilon)
    training = train(forward, ["x", "scale"], fuse)
    # Rewritten in place to our forward op, with its rstd output feeding RmsNormGrad.
    (norm,) = nodes_of(training, "RmsNorm")
    assert not nodes_of(training, "RMSNormalization") and norm.domain == DOMAIN
    eps = 1e-5 if epsilon is None else epsilon
    assert [(a.name, a.f) for a in norm.attribute] == [("epsilon", pytest.approx(eps))]
    assert nodes_of(training, "RmsNormGrad")[0].input[2] == norm.output[1]

    # The rewritten forward computes RMSNormalization (stock ONNX Runtime's, where it runs bfloat16).
    loss = run(training, feeds)["loss"]
    y = rms_norm_oracle(x, scale, eps)[0].astype(t).astype(np.float64)
    assert loss == pytest.approx(np.sum(y * feeds["R"]), rel=TOL[t], abs=TOL[t])
    if t != BF16:
        assert loss == pytest.approx(run(forward, feeds, native=False)["loss"], rel=TOL[t], abs=TOL[t])
    grads = grads_of(training, feeds)
    rstd = rms_norm_oracle(x, scale, eps)[1]
    dx, dscale = rms_norm_grad_oracle(feeds["R"], x, rstd, scale)
    assert_close(grads["x"], dx, TOL[t])
    assert_close(grads["scale"], dscale, SUM_TOL[t])
    assert_paths_agree(training, feeds, grads, {"x": TOL[t], "scale": TOL[t]})
    if t == F32 and epsilon is None:
        assert_finite_differences(forward, feeds, grads, rng, h=1e-2, rtol=2e-4)


@pytest.mark.parametrize(
    "x_shape, axis, scale_shape",
    [((2, 3, 8), -1, (1, 8)), ((2, 3, 8), -2, (8,)), ((2, 3, 8), -1, (1,))],
    ids=["scale-rank-2", "axis-2-scale-rank-1", "scale-broadcast"],
)
def test_rms_normalization_unsupported_scale(x_shape, axis, scale_shape, rng):
    feeds = {
        "x": rng.standard_normal(x_shape).astype(F32),
        "scale": rng.standard_normal(scale_shape).astype(F32),
        "R": loss_weights(rng, x_shape, F32),
    }
    with pytest.raises(GradientError, match="RMSNormalization node 'rmsn'.*rms_normalization.*scale"):
        build_training_model(rms_normalization_model(feeds, axis), "loss", ["x"])


@pytest.mark.parametrize(
    "scale_type, stash_type, message",
    [(F32, 1, "share one of float32"), (F16, 10, "stash_type 1")],
    ids=["mixed-types", "stash-float16"],
)
def test_rms_normalization_unsupported_types(scale_type, stash_type, message, rng):
    """RMSNormalization's Y has scale's type and its math stash_type's: RmsNorm's are x's and float32."""
    feeds = {
        "x": rng.standard_normal((3, 8)).astype(F16),
        "scale": rng.standard_normal(8).astype(scale_type),
        "R": loss_weights(rng, (3, 8), F16),
    }
    node = helper.make_node("RMSNormalization", ["x", "scale"], ["y"], name="rmsn", stash_type=stash_type)
    # onnx's shape inference gives Y X's type, though RMSNormalization's schema says scale's.
    forward = loss_model([node], feeds, "y", F16)
    with pytest.raises(GradientError, match=f"RMSNormalization node 'rmsn'.*{message}"):
        build_training_model(forward, "loss", ["x"])


# RotaryEmbedding (standard, opset 23) -> RotaryPositionEmbeddingGrad.
B, N, S, D, MAX_POS = 2, 3, 4, 8, 7


def rotary_embedding_feeds(rng, t, rank, with_positions):
    x_shape = (B, N, S, D) if rank == 4 else (B, S, N * D)
    cache_shape = (MAX_POS, D // 2) if with_positions else (B, S, D // 2)
    feeds = {
        "x": rng.standard_normal(x_shape).astype(t),
        "cos_cache": rng.standard_normal(cache_shape).astype(t),
        "sin_cache": rng.standard_normal(cache_shape).astype(t),
        "R": loss_weights(rng, x_shape, t),
    }
    if with_positions:
        feeds["position_ids"] = rng.integers(0, MAX_POS, (B, S)).astype(np.int64)
    return feeds


def rotary_embedding_model(feeds, interleaved, rotary_dim=0):
    inputs = ["x", "cos_cache", "sin_cache"] + (["position_ids"] if "position_ids" in feeds else [])
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rotary_dim}
    if feeds["x"].ndim == 3:
        attrs["num_heads"] = N
    node = helper.make_node("RotaryEmbedding", inputs, ["y"], name="rope", **attrs)
    return loss_model([node], feeds, "y", feeds["x"].dtype, {"y": feeds["x"].dtype})


def our_rope_view(feeds, interleaved):
    """RotaryEmbedding as our op sees it: x as [B, N, S, D] or [B, S, N, D], and the full-width
    tables [B, 1, S, D] or [B, S, 1, D] (each value twice in a row, or the half table twice)."""
    tables = []
    for cache in ("cos_cache", "sin_cache"):
        half = feeds[cache].astype(np.float64)
        half = half[feeds["position_ids"]] if "position_ids" in feeds else half
        full = np.repeat(half, 2, axis=-1) if interleaved else np.concatenate([half, half], axis=-1)
        tables.append(full[:, None] if feeds["x"].ndim == 4 else full[:, :, None])
    view = feeds["x"] if feeds["x"].ndim == 4 else feeds["x"].reshape(B, S, N, D)
    return view, *tables


@pytest.mark.parametrize("with_positions", [False, True], ids=["caches", "position_ids"])
@pytest.mark.parametrize("rank", [4, 3], ids=["4d", "3d"])
@pytest.mark.parametrize("interleaved", [0, 1], ids=["half", "interleaved"])
def test_rotary_embedding_is_our_rope(interleaved, rank, with_positions, rng):
    """The mapping the rule relies on: ONNX Runtime's RotaryEmbedding kernel equals our op's mode
    0 (not interleaved) or 1 (interleaved) with the full-width tables."""
    feeds = rotary_embedding_feeds(rng, F32, rank, with_positions)
    y = run(rotary_embedding_model(feeds, interleaved), feeds, native=False)["y"]
    assert_close(y, rope_oracle(*our_rope_view(feeds, interleaved), interleaved).reshape(y.shape), TOL[F32])


def rotary_embedding_case(interleaved, rank, with_positions, t):
    name = (
        f"{'interleaved' if interleaved else 'half'}-{rank}d-{'position_ids' if with_positions else 'caches'}"
    )
    return pytest.param(interleaved, rank, with_positions, t, id=f"{name}-{t.name}")


# Every variant in float32, one layout in the half types.
ROTARY_EMBEDDING_CASES = [
    *(rotary_embedding_case(i, r, p, F32) for i in (0, 1) for r in (4, 3) for p in (False, True)),
    *(rotary_embedding_case(i, 4, True, t) for i in (0, 1) for t in (F16, BF16)),
]


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "rule"])
@pytest.mark.parametrize("interleaved, rank, with_positions, t", ROTARY_EMBEDDING_CASES)
def test_rotary_embedding(interleaved, rank, with_positions, t, fuse, rng):
    feeds = rotary_embedding_feeds(rng, t, rank, with_positions)
    rotary_dim = D if rank == 4 else 0  # the head size, spelled out, or 0
    forward = rotary_embedding_model(feeds, interleaved, rotary_dim)
    training = train(forward, ["x"], fuse)
    (node,) = nodes_of(training, "RotaryPositionEmbeddingGrad")
    assert (
        len(node.input) == 4
        and not node.input[3]
        and helper.get_attribute_value(node.attribute[0]) == interleaved
    )
    if t == BF16:  # stock ONNX Runtime has no CPU RotaryEmbedding (nor Mul) for bfloat16 to run the forward
        return

    grads = grads_of(training, feeds)
    # RotaryEmbedding rotates each pair by [[c, -s], [s, c]]; its transpose is the same op with -sin.
    positions = feeds.get("position_ids")
    spec = onnx_rotary_embedding(
        feeds["R"].astype(np.float64),
        feeds["cos_cache"].astype(np.float64),
        -feeds["sin_cache"].astype(np.float64),
        positions,
        interleaved=interleaved,
        num_heads=N,
    )
    view, cos, sin = our_rope_view(feeds, interleaved)
    dy = feeds["R"].reshape(view.shape)
    ours = rope_grad_oracle(dy, cos, sin, None, interleaved)[0].reshape(feeds["x"].shape)
    assert_close(ours, spec, 1e-12)
    assert_close(grads["x"], spec, TOL[t])
    assert_paths_agree(training, feeds, grads, {"x": TOL[t]})
    if t == F32 and with_positions:
        assert_finite_differences(forward, feeds, grads, rng, h=1e-2, rtol=2e-4)


def test_rotary_embedding_partial_rotation_is_refused(rng):
    feeds = rotary_embedding_feeds(rng, F32, 4, True)
    for cache in ("cos_cache", "sin_cache"):  # rotary_embedding_dim / 2 wide
        feeds[cache] = np.ascontiguousarray(feeds[cache][:, : D // 4])
    with pytest.raises(GradientError, match="RotaryEmbedding node 'rope'.*full rotation"):
        build_training_model(rotary_embedding_model(feeds, 0, rotary_dim=D // 2), "loss", ["x"])


@pytest.mark.parametrize("cache", ["cos_cache", "sin_cache"])
def test_rotary_embedding_cache_gradients(cache, rng):
    # The standard op's rule refuses them; fused, our op's dcos and dsin give them.
    feeds = rotary_embedding_feeds(rng, F32, 3, False)
    forward = rotary_embedding_model(feeds, 1)
    with pytest.raises(GradientError, match="RotaryEmbedding node 'rope'.*cos_cache and sin_cache"):
        build_training_model(forward, "loss", ["x", cache], fuse=False)
    grads = grads_of(train(forward, ["x", cache]), feeds)
    assert_finite_differences(forward, feeds, grads, rng, h=1e-2, rtol=2e-4)


# FlashAttentionScore.
def attention_model(feeds, attrs, outputs=("out", "row_max", "row_sum"), out="out"):
    inputs = [n if n in feeds else "" for n in ("query", "key", "value", "atten_mask")]
    inputs += [n for n in ("actual_seq_lengths_query", "actual_seq_lengths_kv") if n in feeds]
    while not inputs[-1]:
        inputs.pop()
    node = helper.make_node(
        "FlashAttentionScore", inputs, list(outputs), domain=DOMAIN, name="attention", **attrs
    )
    return loss_model([node], feeds, out, feeds["query"].dtype)


@pytest.mark.parametrize(
    "layout, kw",
    [
        ("BNSD", {"sparse_mode": 3}),
        ("BSND", {"mask": "b1"}),
        ("TND", {"sparse_mode": 3, "dv": 4}),
    ],
    ids=["BNSD-causal", "BSND-mask", "TND-causal"],
)
@pytest.mark.parametrize("t", [F32, BF16], ids=lambda t: t.name)
def test_flash_attention_score(t, layout, kw, rng):
    inputs, attrs = flash_attention_inputs(rng, layout, t, **kw)
    out_shape = flash_attention_inputs(np.random.default_rng(0), layout, F32, grad=True, **kw)[0]["dy"].shape
    feeds = inputs | {"R": loss_weights(rng, out_shape, t)}
    forward = attention_model(feeds, attrs)
    wrt = ["query", "key", "value"]
    training = train(forward, wrt)
    (node,) = nodes_of(training, "FlashAttentionScoreGrad")
    assert node.input[7] == "out"  # the forward's output and statistics, not recomputed
    grads = grads_of(training, feeds)
    dy = feeds["R"].astype(t)
    refs = flash_attention_grad_oracle(
        inputs["query"], inputs["key"], inputs["value"], dy, inputs.get("atten_mask"),
        actual_seq_lengths_query=inputs.get("actual_seq_lengths_query"),
        actual_seq_lengths_kv=inputs.get("actual_seq_lengths_kv"), **attrs,
    )  # fmt: skip
    for name, ref in zip(wrt, refs, strict=True):
        assert_close(grads[name], ref, TOL[t] if t == F32 else 2 * TOL[t])
    assert_paths_agree(training, feeds, grads, dict.fromkeys(wrt, TOL[t] if t == F32 else 2 * TOL[t]))
    if t == F32:
        assert_finite_differences(forward, feeds, grads, rng, h=1e-3, rtol=5e-4)


def test_flash_attention_score_statistics_are_not_differentiated(rng):
    inputs, attrs = flash_attention_inputs(rng, "BNSD", F32, sparse_mode=3)
    feeds = inputs | {"R": np.ones((2, 4, 5, 8), np.float32)}
    forward = attention_model(feeds, attrs, ("out", "row_max"), "row_max")
    with pytest.raises(GradientError, match="FlashAttentionScore node 'attention'.*statistic"):
        build_training_model(forward, "loss", ["query"])
