"""``fuse``: each spelling of RMSNorm and of the rotary embedding becomes our op, the fused model
computes what the original did (stock ONNX Runtime, or a float64 NumPy formula where stock ORT
refuses the original), and near misses are left alone. Exported Hugging Face models are in
test_hf_models.py."""

import collections

import numpy as np
import onnx
import pytest
from onnxscript import FLOAT, FLOAT16, INT64, script
from onnxscript import opset18 as op
from onnxscript import opset23 as op23

from oracles import rms_norm_oracle, rope_oracle
from ort_ascend_ops import fuse, make_session
from ort_ascend_ops.fusion import fold_constants

B, S, N, D = 2, 5, 3, 8
H, HALF = N * D, D // 2
# onnxscript takes Python lists of constants from the enclosing scope, not expressions.
START, MIDDLE, WHOLE, END, LAST, ONE, TWO, ODD = [0], [HALF], [D], [2**63 - 1], [3], [1], [2], [1]
X_SHAPE = [B, N, S, D]


def ours(model):
    return collections.Counter(n.op_type for n in model.graph.node if n.domain == "ort_ascend_ops")


def run(model, inputs, native=True):
    return make_session(model, native=native).run(inputs)


# RMSNorm spellings over [B, S, H] with weight [H].
@script()
def llama_norm(x: FLOAT[B, S, H], w: FLOAT[H]) -> FLOAT[B, S, H]:
    wide = op.Cast(x, to=1)
    rstd = op.Reciprocal(op.Sqrt(op.Add(op.ReduceMean(op.Pow(wide, 2.0), [-1], keepdims=1), 1e-6)))
    return op.Mul(w, op.Cast(op.Mul(wide, rstd), to=1))


@script()
def div_norm(x: FLOAT[B, S, H], w: FLOAT[H]) -> FLOAT[B, S, H]:
    return op.Mul(op.Div(x, op.Sqrt(op.Add(1e-5, op.ReduceMean(op.Mul(x, x), [2])))), w)


@script()
def half_norm(x: FLOAT16[B, S, H], w: FLOAT16[H]) -> FLOAT16[B, S, H]:
    wide = op.Cast(x, to=1)
    rstd = op.Reciprocal(op.Sqrt(op.Add(op.ReduceMean(op.Pow(wide, 2.0), [-1]), 1e-6)))
    return op.Mul(op.Cast(op.Mul(wide, rstd), to=10), w)


@script()
def gemma_norm(x: FLOAT16[B, S, H], w: FLOAT16[H]) -> FLOAT16[B, S, H]:
    # Gemma scales by (1 + w) in float32, then narrows: RmsNorm(x: f16, gamma: f32).
    wide = op.Cast(x, to=1)
    rstd = op.Reciprocal(op.Sqrt(op.Add(op.ReduceMean(op.Pow(wide, 2.0), [-1]), 1e-6)))
    return op.Cast(op.Mul(op.Mul(wide, rstd), op.Add(op.Cast(w, to=1), 1.0)), to=10)


@script()
def standard_norm(x: FLOAT[B, S, H], w: FLOAT[H]) -> FLOAT[B, S, H]:
    return op23.RMSNormalization(x, w, epsilon=1e-6)


@script()
def two_axis_norm(x: FLOAT[B, S, H], w: FLOAT[H]) -> FLOAT[B, S, H]:
    rstd = op.Reciprocal(op.Sqrt(op.Add(op.ReduceMean(op.Mul(x, x), [-2, -1]), 1e-6)))
    return op.Mul(op.Mul(x, rstd), w)


@script()
def cube_norm(x: FLOAT[B, S, H], w: FLOAT[H]) -> FLOAT[B, S, H]:
    rstd = op.Reciprocal(op.Sqrt(op.Add(op.ReduceMean(op.Pow(x, 3.0), [-1]), 1e-6)))
    return op.Mul(op.Mul(x, rstd), w)


@script()
def scalar_scale_norm(x: FLOAT[B, S, H], w: FLOAT[1]) -> FLOAT[B, S, H]:
    rstd = op.Reciprocal(op.Sqrt(op.Add(op.ReduceMean(op.Mul(x, x), [-1]), 1e-6)))
    return op.Mul(op.Mul(x, rstd), w)


def _norm_inputs(rng, dtype):
    return {"x": rng.standard_normal((B, S, H)).astype(dtype), "w": rng.uniform(0.5, 1.5, H).astype(dtype)}


NORMS = [  # (function, opset, dtype, epsilon, gamma offset)
    (llama_norm, 18, np.float32, 1e-6, 0.0),
    (div_norm, 18, np.float32, 1e-5, 0.0),
    (half_norm, 18, np.float16, 1e-6, 0.0),
    (gemma_norm, 18, np.float16, 1e-6, 1.0),
    (standard_norm, 23, np.float32, 1e-6, 0.0),
]


@pytest.mark.parametrize("function, opset, dtype, epsilon, offset", NORMS, ids=[n[0].name for n in NORMS])
@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
def test_norm_spellings_become_rms_norm(function, opset, dtype, epsilon, offset, native, rng):
    model = function.to_model_proto(opset_version=opset)
    fused = fuse(model)
    assert ours(fused) == {"RmsNorm": 1}
    onnx.checker.check_model(fused, full_check=True)
    inputs = _norm_inputs(rng, dtype)
    (out,) = run(fused, inputs, native)
    ref, _rstd = rms_norm_oracle(
        inputs["x"].astype(np.float64), inputs["w"].astype(np.float64) + offset, epsilon
    )
    tol = 1e-6 if dtype == np.float32 else 2e-3
    assert out.dtype == dtype
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < tol


@pytest.mark.parametrize("function", [two_axis_norm, cube_norm, scalar_scale_norm], ids=lambda f: f.name)
def test_near_miss_norms_are_left_alone(function, rng):
    model = function.to_model_proto()
    fused = fuse(model)
    assert not ours(fused)
    inputs = _norm_inputs(rng, np.float32)
    inputs["w"] = inputs["w"][: model.graph.input[1].type.tensor_type.shape.dim[0].dim_value]
    np.testing.assert_allclose(run(fused, inputs)[0], run(model, inputs)[0], rtol=1e-6)


# Rotary spellings on x [B, N, S, D] (BNSD) with tables [1, 1, S, D].
@script()
def rotate_half(x: FLOAT[B, N, S, D], cos: FLOAT[1, 1, S, D], sin: FLOAT[1, 1, S, D]) -> FLOAT[B, N, S, D]:
    first = op.Slice(x, START, MIDDLE, LAST, ONE)
    second = op.Slice(x, MIDDLE, END, LAST, ONE)
    return op.Add(op.Mul(x, cos), op.Mul(op.Concat(op.Neg(second), first, axis=-1), sin))


@script()
def rotate_half_wrong_sign(
    x: FLOAT[B, N, S, D], cos: FLOAT[1, 1, S, D], sin: FLOAT[1, 1, S, D]
) -> FLOAT[B, N, S, D]:
    first = op.Slice(x, START, MIDDLE, LAST, ONE)
    second = op.Slice(x, MIDDLE, WHOLE, LAST, ONE)
    return op.Add(op.Mul(x, cos), op.Mul(op.Concat(second, op.Neg(first), axis=-1), sin))


@script()
def rotate_half_narrow_tables(
    x: FLOAT[B, N, S, D], cos: FLOAT[1, 1, S, 1], sin: FLOAT[1, 1, S, 1]
) -> FLOAT[B, N, S, D]:
    first = op.Slice(x, START, MIDDLE, LAST, ONE)
    second = op.Slice(x, MIDDLE, WHOLE, LAST, ONE)
    return op.Add(op.Mul(x, cos), op.Mul(op.Concat(op.Neg(second), first, axis=-1), sin))


@script()
def rotate_every_two(
    x: FLOAT[B, N, S, D], cos: FLOAT[1, 1, S, D], sin: FLOAT[1, 1, S, D]
) -> FLOAT[B, N, S, D]:
    even = op.Slice(x, START, END, LAST, TWO)
    odd = op.Slice(x, ODD, END, LAST, TWO)
    pairs = op.Concat(op.Unsqueeze(op.Neg(odd), [-1]), op.Unsqueeze(even, [-1]), axis=-1)
    return op.Add(op.Mul(x, cos), op.Mul(op.Reshape(pairs, X_SHAPE), sin))


def _rope_inputs(rng, table_dims=D):
    angles = rng.uniform(-3, 3, (1, 1, S, table_dims))
    return {
        "x": rng.standard_normal((B, N, S, D)).astype(np.float32),
        "cos": np.cos(angles).astype(np.float32),
        "sin": np.sin(angles).astype(np.float32),
    }


@pytest.mark.parametrize(
    "function, mode", [(rotate_half, 0), (rotate_every_two, 1)], ids=["half", "every_two"]
)
@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
def test_rotary_spellings_become_our_op(function, mode, native, rng):
    model = function.to_model_proto()
    fused = fuse(model)
    assert ours(fused) == {"RotaryPositionEmbedding": 1}
    (node,) = [n for n in fused.graph.node if n.domain == "ort_ascend_ops"]
    assert node.attribute[0].i == mode
    inputs = _rope_inputs(rng)
    (out,) = run(fused, inputs, native)
    ref = rope_oracle(*(inputs[k].astype(np.float64) for k in ("x", "cos", "sin")), mode)
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-6
    np.testing.assert_allclose(out, run(model, inputs)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "function, width",
    [(rotate_half_wrong_sign, D), (rotate_half_narrow_tables, 1)],
    ids=["wrong_sign", "tables_broadcast_last_axis"],
)
def test_near_miss_rotations_are_left_alone(function, width, rng):
    model = function.to_model_proto()
    fused = fuse(model)
    assert not ours(fused)
    inputs = _rope_inputs(rng, width)
    np.testing.assert_allclose(run(fused, inputs)[0], run(model, inputs)[0], rtol=1e-6)


# cat(a * c - b * s, b * c + a * s) with half-width tables [1, 1, S, D/2]: a, b the halves of x
# (GPT-OSS, by Split or by Slice: mode 0) or its even and odd elements (DeepSeek-V3's MLA: mode 3).
@script()
def split_halves(x: FLOAT[B, N, S, D], c: FLOAT[1, 1, S, HALF], s: FLOAT[1, 1, S, HALF]) -> FLOAT[B, N, S, D]:
    a, b = op.Split(x, axis=-1, num_outputs=2)
    return op.Concat(op.Sub(op.Mul(a, c), op.Mul(b, s)), op.Add(op.Mul(b, c), op.Mul(a, s)), axis=-1)


@script()
def sliced_halves(
    x: FLOAT[B, N, S, D], c: FLOAT[1, 1, S, HALF], s: FLOAT[1, 1, S, HALF]
) -> FLOAT[B, N, S, D]:
    a = op.Slice(x, START, MIDDLE, LAST, ONE)
    b = op.Slice(x, MIDDLE, END, LAST, ONE)
    return op.Concat(op.Sub(op.Mul(a, c), op.Mul(b, s)), op.Add(op.Mul(c, b), op.Mul(a, s)), axis=-1)


@script()
def interleaved_halves(
    x: FLOAT[B, N, S, D], c: FLOAT[1, 1, S, HALF], s: FLOAT[1, 1, S, HALF]
) -> FLOAT[B, N, S, D]:
    a = op.Slice(x, START, END, LAST, TWO)
    b = op.Slice(x, ODD, END, LAST, TWO)
    return op.Concat(op.Sub(op.Mul(a, c), op.Mul(b, s)), op.Add(op.Mul(b, c), op.Mul(a, s)), axis=-1)


@script()
def interleaved_halves_wrong_sign(
    x: FLOAT[B, N, S, D], c: FLOAT[1, 1, S, HALF], s: FLOAT[1, 1, S, HALF]
) -> FLOAT[B, N, S, D]:
    a = op.Slice(x, START, END, LAST, TWO)
    b = op.Slice(x, ODD, END, LAST, TWO)
    return op.Concat(op.Sub(op.Mul(a, c), op.Mul(b, s)), op.Sub(op.Mul(b, c), op.Mul(a, s)), axis=-1)


@script()
def strided_halves_mixed(
    x: FLOAT[B, N, S, D], c: FLOAT[1, 1, S, HALF], s: FLOAT[1, 1, S, HALF]
) -> FLOAT[B, N, S, D]:
    a = op.Slice(x, START, MIDDLE, LAST, ONE)  # a contiguous half with the odd elements
    b = op.Slice(x, ODD, END, LAST, TWO)
    return op.Concat(op.Sub(op.Mul(a, c), op.Mul(b, s)), op.Add(op.Mul(b, c), op.Mul(a, s)), axis=-1)


def _half_table_inputs(rng):
    angles = rng.uniform(-3, 3, (1, 1, S, HALF))
    x = rng.standard_normal((B, N, S, D)).astype(np.float32)
    return {"x": x, "c": np.cos(angles).astype(np.float32), "s": np.sin(angles).astype(np.float32)}


@pytest.mark.parametrize(
    "function, mode",
    [(split_halves, 0), (sliced_halves, 0), (interleaved_halves, 3)],
    ids=["split", "sliced", "interleaved"],
)
@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
def test_rotations_of_halves_become_our_op(function, mode, native, rng):
    model = function.to_model_proto()
    fused = fuse(model)
    assert ours(fused) == {"RotaryPositionEmbedding": 1}
    (node,) = [n for n in fused.graph.node if n.domain == "ort_ascend_ops"]
    assert node.attribute[0].i == mode
    inputs = _half_table_inputs(rng)
    (out,) = run(fused, inputs, native)
    cos, sin = (np.concatenate([inputs[k]] * 2, axis=-1).astype(np.float64) for k in ("c", "s"))
    ref = rope_oracle(inputs["x"].astype(np.float64), cos, sin, mode)
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-6
    np.testing.assert_allclose(out, run(model, inputs)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "function", [interleaved_halves_wrong_sign, strided_halves_mixed], ids=["wrong_sign", "mixed_halves"]
)
def test_near_miss_rotations_of_halves_are_left_alone(function, rng):
    model = function.to_model_proto()
    fused = fuse(model)
    assert not ours(fused)
    inputs = _half_table_inputs(rng)
    np.testing.assert_allclose(run(fused, inputs)[0], run(model, inputs)[0], rtol=1e-6)


# The standard RotaryEmbedding-23: half-width caches.
@script()
def standard_rope(x: FLOAT[B, N, S, D], cos: FLOAT[1, S, HALF], sin: FLOAT[1, S, HALF]) -> FLOAT[B, N, S, D]:
    return op23.RotaryEmbedding(x, cos, sin)


@script()
def standard_rope_positions(
    x: FLOAT[B, S, H], cos: FLOAT[16, HALF], sin: FLOAT[16, HALF], positions: INT64[B, S]
) -> FLOAT[B, S, H]:
    return op23.RotaryEmbedding(x, cos, sin, positions, interleaved=1, num_heads=N)


def _half_tables(rng, rows):
    angles = rng.uniform(-3, 3, rows + (D // 2,))
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
def test_standard_rotary_embedding_broadcasts_its_caches_over_the_batch(native, rng):
    # Stock ONNX Runtime refuses caches of one row for a batch of two; the fused model runs.
    fused = fuse(standard_rope.to_model_proto())
    assert ours(fused) == {"RotaryPositionEmbedding": 1}
    cos, sin = _half_tables(rng, (1, S))
    x = rng.standard_normal((B, N, S, D)).astype(np.float32)
    (out,) = run(fused, {"x": x, "cos": cos, "sin": sin}, native)
    full = [np.concatenate([t, t], -1)[:, None].astype(np.float64) for t in (cos, sin)]
    ref = rope_oracle(x.astype(np.float64), *full, 0)
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-6


@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
def test_standard_rotary_embedding_with_positions_and_packed_heads(native, rng):
    model = standard_rope_positions.to_model_proto()
    fused = fuse(model)
    assert ours(fused) == {"RotaryPositionEmbedding": 1}
    cos, sin = _half_tables(rng, (16,))
    inputs = {
        "x": rng.standard_normal((B, S, H)).astype(np.float32),
        "cos": cos,
        "sin": sin,
        "positions": rng.integers(0, 16, (B, S)),
    }
    (out,) = run(fused, inputs, native)
    np.testing.assert_allclose(out, run(model, inputs)[0], rtol=1e-5, atol=1e-6)


def test_folding_keeps_every_weight_an_initializer():
    # A transposed weight folded into a constant would no longer be the parameter.
    @script()
    def linear(x: FLOAT[2, 4], w: FLOAT[3, 4]) -> FLOAT[2, 3]:
        return op.MatMul(x, op.Transpose(w, perm=[1, 0]))

    model = linear.to_model_proto()
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.ones((3, 4), np.float32), "w"))
    del model.graph.input[1]
    for folded in (fold_constants(model), fuse(model)):
        assert [i.name for i in folded.graph.initializer] == ["w"]
        assert [n.op_type for n in folded.graph.node] == ["Transpose", "MatMul"]


# The DeepSeek-V3.2 indexer as transformers exports it: q [B,S,N,D], k [B,S,D], w [B,S,N]; the
# causal mask additive (eager attention) or boolean (SDPA), the top-K of the masked index scores.
K = 3
CAUSAL = np.tril(np.ones((S, S), bool))
ADDITIVE = onnx.numpy_helper.from_array(
    np.where(CAUSAL, 0, np.finfo(np.float32).min).astype(np.float32)[None]
)
EXCLUDED = onnx.numpy_helper.from_array(~CAUSAL[None])
WINDOW = onnx.numpy_helper.from_array((~CAUSAL | np.tril(np.ones((S, S), bool), -2))[None])  # 2 keys back
MINUS_INF = [float("-inf")]
TOP, NEGATIVE_SCALE = [K], [-0.25]


@script()
def index_scores(q: FLOAT[B, S, N, D], k: FLOAT[B, S, D], w: FLOAT[B, S, N]) -> FLOAT[B, S, S]:
    scores = op.Relu(op.Mul(op.MatMul(q, op.Unsqueeze(op.Transpose(k, perm=[0, 2, 1]), [1])), 0.25))
    return op.Squeeze(op.MatMul(op.Unsqueeze(w, [-2]), scores), [-2])


@script()
def additive_indexer(q: FLOAT[B, S, N, D], k: FLOAT[B, S, D], w: FLOAT[B, S, N]) -> INT64[B, S, K]:
    _, indices = op.TopK(op.Add(index_scores(q, k, w), op.Constant(value=ADDITIVE)), TOP, axis=-1)
    return indices


@script()
def boolean_indexer(q: FLOAT[B, S, N, D], k: FLOAT[B, S, D], w: FLOAT[B, S, N]) -> INT64[B, S, K]:
    masked = op.Where(op.Constant(value=EXCLUDED), MINUS_INF, index_scores(q, k, w))
    _, indices = op.TopK(masked, TOP, axis=-1)
    return indices


@script()
def window_indexer(q: FLOAT[B, S, N, D], k: FLOAT[B, S, D], w: FLOAT[B, S, N]) -> INT64[B, S, K]:
    _, indices = op.TopK(op.Where(op.Constant(value=WINDOW), MINUS_INF, index_scores(q, k, w)), TOP, axis=-1)
    return indices


@script()
def negative_scale_indexer(q: FLOAT[B, S, N, D], k: FLOAT[B, S, D], w: FLOAT[B, S, N]) -> INT64[B, S, K]:
    scores = op.Relu(op.Mul(op.MatMul(q, op.Unsqueeze(op.Transpose(k, perm=[0, 2, 1]), [1])), NEGATIVE_SCALE))
    index = op.Squeeze(op.MatMul(op.Unsqueeze(w, [-2]), scores), [-2])
    _, indices = op.TopK(op.Add(index, op.Constant(value=ADDITIVE)), TOP, axis=-1)
    return indices


@script()
def values_used_indexer(q: FLOAT[B, S, N, D], k: FLOAT[B, S, D], w: FLOAT[B, S, N]) -> FLOAT[B, S, K]:
    values, _ = op.TopK(op.Add(index_scores(q, k, w), op.Constant(value=ADDITIVE)), TOP, axis=-1)
    return values


def _indexer_inputs(rng):
    return {
        "q": rng.standard_normal((B, S, N, D)).astype(np.float32),
        "k": rng.standard_normal((B, S, D)).astype(np.float32),
        "w": rng.standard_normal((B, S, N)).astype(np.float32),
    }


def _inlined(function):
    return onnx.inliner.inline_local_functions(function.to_model_proto())


@pytest.mark.parametrize("function", [additive_indexer, boolean_indexer], ids=lambda f: f.name)
@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
def test_indexer_spellings_become_lightning_indexer(function, native, rng):
    fused = fuse(_inlined(function))
    assert ours(fused) == {"LightningIndexer": 1}
    inputs = _indexer_inputs(rng)
    (out,) = run(fused, inputs, native)
    q, k, w = (inputs[n].astype(np.float64) for n in ("q", "k", "w"))
    scores = np.einsum("bsn,bsnt->bst", w, np.maximum(0.25 * np.einsum("bsnd,btd->bsnt", q, k), 0))
    scores = np.where(CAUSAL, scores, -np.inf)
    ref = np.argsort(-scores, axis=-1, kind="stable")[..., :K]  # ties to the lower key, as both do
    valid = np.arange(K)[None, :] < np.arange(1, S + 1)[:, None]
    np.testing.assert_array_equal(out[:, valid], ref[:, valid])
    assert (out[:, ~valid] == -1).all()  # where transformers' TopK names masked keys


@pytest.mark.parametrize(
    "function", [window_indexer, negative_scale_indexer, values_used_indexer], ids=lambda f: f.name
)
def test_near_miss_indexers_are_left_alone(function, rng):
    model = _inlined(function)
    fused = fuse(model)
    assert not ours(fused)
    inputs = _indexer_inputs(rng)
    np.testing.assert_array_equal(run(fused, inputs)[0], run(model, inputs)[0])


def test_an_indexer_mask_gathered_out_of_range_is_left_alone_without_an_error():
    # A hostile model: the mask is row 7 of a constant with one row. ONNX Runtime would refuse
    # the Gather when run; fuse reads the constant at fuse time, and must neither raise nor fuse.
    model = _inlined(additive_indexer)
    mask = next(
        n
        for n in model.graph.node
        if n.op_type == "Constant"
        and n.output[0] in {i for m in model.graph.node if m.op_type == "Add" for i in m.input}
    )
    gathered = mask.output[0]
    mask.output[0] = "mask_rows"
    index = onnx.helper.make_node("Constant", [], ["mask_row"], value_ints=[7])
    gather = onnx.helper.make_node("Gather", ["mask_rows", "mask_row"], [gathered], axis=0)
    position = list(model.graph.node).index(mask) + 1
    for offset, node in enumerate([index, gather]):
        model.graph.node.insert(position + offset, node)
    assert not ours(fuse(model))


# Gated MLPs over h [B, S, H] with intermediate I.
I = 6  # noqa: E741


@script()
def separate_mlp(h: FLOAT[B, S, H], wg: FLOAT[I, H], wu: FLOAT[I, H]) -> FLOAT[B, S, I]:
    gate = op.MatMul(h, op.Transpose(wg, perm=[1, 0]))
    up = op.MatMul(h, op.Transpose(wu, perm=[1, 0]))
    return op.Mul(op.Mul(gate, op.Sigmoid(gate)), up)


@script()
def separate_mlp_plain_weights(h: FLOAT[B, S, H], wg: FLOAT[H, I], wu: FLOAT[H, I]) -> FLOAT[B, S, I]:
    gate = op.MatMul(h, wg)
    up = op.MatMul(h, wu)
    return op.Mul(up, op.Mul(op.Sigmoid(gate), gate))


@script()
def merged_mlp(h: FLOAT[B, S, H], w: FLOAT[H, 2 * I]) -> FLOAT[B, S, I]:
    gate, up = op.Split(op.MatMul(h, w), axis=-1, num_outputs=2)
    return op.Mul(op.Mul(gate, op.Sigmoid(gate)), up)


@script()
def gated_values(gate: FLOAT16[B, S, I], up: FLOAT16[B, S, I]) -> FLOAT16[B, S, I]:
    return op.Mul(op.Mul(gate, op.Sigmoid(gate)), up)


@script()
def sigmoid_of_another(gate: FLOAT[B, S, I], other: FLOAT[B, S, I], up: FLOAT[B, S, I]) -> FLOAT[B, S, I]:
    return op.Mul(op.Mul(gate, op.Sigmoid(other)), up)


@script()
def broadcast_up(gate: FLOAT[B, S, I], up: FLOAT[I]) -> FLOAT[B, S, I]:
    return op.Mul(op.Mul(gate, op.Sigmoid(gate)), up)


def _mlp_inputs(function, rng):
    shapes = {"h": (B, S, H), "wg": (I, H), "wu": (I, H), "w": (H, 2 * I), "gate": (B, S, I)}
    shapes |= {"up": (B, S, I), "other": (B, S, I)}
    inputs = {}
    for p in function.to_function_proto().input:
        shape = shapes[p] if function is not separate_mlp_plain_weights or p == "h" else (H, I)
        if function is broadcast_up and p == "up":
            shape = (I,)
        dtype = np.float16 if function is gated_values else np.float32
        inputs[p] = rng.standard_normal(shape).astype(dtype)
    return inputs


MLPS = [  # (function, the product count after fusion)
    (separate_mlp, 1),
    (separate_mlp_plain_weights, 1),
    (merged_mlp, 1),
    (gated_values, 0),
]


@pytest.mark.parametrize("function, products", MLPS, ids=[m[0].name for m in MLPS])
@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
def test_gated_mlp_spellings_become_swi_glu(function, products, native, rng):
    model = function.to_model_proto(opset_version=18)
    fused = fuse(model)
    assert ours(fused) == {"SwiGlu": 1}
    assert sum(n.op_type == "MatMul" for n in fused.graph.node) == products
    onnx.checker.check_model(fused, full_check=True)
    inputs = _mlp_inputs(function, rng)
    (want,) = run(model, inputs, native=False)
    (out,) = run(fused, inputs, native)
    tol = 1e-6 if out.dtype == np.float32 else 2e-3
    assert out.dtype == want.dtype
    assert np.linalg.norm(out.astype(np.float64) - want) / np.linalg.norm(want) < tol


@pytest.mark.parametrize("function", [sigmoid_of_another, broadcast_up], ids=lambda f: f.name)
def test_near_miss_gated_mlps_are_left_alone(function):
    assert ours(fuse(function.to_model_proto(opset_version=18))) == {}
