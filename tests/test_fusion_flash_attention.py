"""``fuse`` rewrites exported attention to FlashAttentionScore: eager softmax attention and
``scaled_dot_product_attention`` (the exporter's decomposition at opset 18, the standard Attention
at 23), causal, padded, both or neither, sliding windows, grouped-query heads, static and dynamic
shapes, and Hugging Face models. Each export is fused, its FlashAttentionScore nodes counted
(no Softmax, Attention or float Expand left: K and V are read before their repetition), and its
outputs on fresh inputs compared with PyTorch's forward, native and portable. Attention whose
fused form would differ from torch's (a row without keys under an eager mask, a bias, softcapping)
must be left alone and stay correct."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import onnx
import pytest
from model_oracles import relative_error
from onnxscript import FLOAT, script
from onnxscript import opset18 as op

from ort_ascend_ops import fuse, make_session

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ort_ascend_ops.examples import hf_models as hf  # noqa: E402
from ort_ascend_ops.training import build_training_model, export_torch  # noqa: E402

B, N1, S, D = 2, 4, 6, 8
WINDOW = 3
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3}


@dataclasses.dataclass(frozen=True)
class Case:
    """One export: ``spelling`` eager or sdpa; ``mask`` causal, padding, both, none, window
    (causal within WINDOW keys), is_causal (sdpa's flag), rowless (a constant with a row of no
    keys), bias (a float bias, not a mask), softcap (tanh of the scores); ``kv`` heads (N1: no
    GQA); ``fused``: the FlashAttentionScore nodes expected; ``attributes`` the node must have."""

    spelling: str
    mask: str
    kv: int = 2
    opset: int = 18
    dynamic: bool = False
    fused: int = 1
    attributes: dict = dataclasses.field(default_factory=dict)
    dtype: torch.dtype = torch.float32

    @property
    def id(self) -> str:
        shapes = "dynamic" if self.dynamic else "static"
        heads = "gqa" if self.kv < N1 else "mha"
        return f"{self.spelling}-{self.mask}-{heads}-opset{self.opset}-{shapes}-{str(self.dtype)[6:]}"


def _allowed(mask: str, s1: int, s2: int):
    """The constant part of the mask, true where allowed (None: every key)."""
    rows, keys = torch.arange(s1)[:, None], torch.arange(s2)[None, :]
    if mask in ("causal", "both", "is_causal"):
        return keys <= rows
    if mask == "window":
        return (keys <= rows) & (keys > rows - WINDOW)
    if mask == "rowless":
        return (keys <= rows) & (rows != 1)  # row 1 keeps no key
    return None


class Attention(torch.nn.Module):
    def __init__(self, case: Case):
        super().__init__()
        self.case = case

    def forward(self, q, k, v, attention_mask=None):
        case, s1, s2 = self.case, q.shape[2], k.shape[2]
        allowed = _allowed(case.mask, s1, s2)
        if attention_mask is not None:  # [B, S2] of 1 (keep) and 0 (padding), as transformers has it
            padding = attention_mask.bool()[:, None, None, :]
            allowed = padding if allowed is None else allowed & padding
        gqa = k.shape[1] != q.shape[1]
        if case.spelling == "sdpa":
            functional = torch.nn.functional.scaled_dot_product_attention
            if case.mask == "is_causal":
                return functional(q, k, v, is_causal=True, enable_gqa=gqa)
            if (
                case.mask == "bias"
            ):  # a float mask of transformers' fill: softmax gives a row without keys the mean
                bias = torch.where(allowed, 0.0, torch.finfo(q.dtype).min).to(q.dtype)
                bias = bias.expand(-1, -1, s1, -1)  # ORT's Attention takes no mask broadcast over S1
                return functional(q, k, v, attn_mask=bias, enable_gqa=gqa)
            return functional(q, k, v, attn_mask=allowed, enable_gqa=gqa)
        groups = q.shape[1] // k.shape[1]  # transformers' repeat_kv
        k, v = (
            x[:, :, None].expand(-1, -1, groups, -1, -1).reshape(q.shape[0], -1, s2, x.shape[-1])
            for x in (k, v)
        )
        scores = torch.matmul(q, k.transpose(2, 3)) * D**-0.5
        if case.mask == "softcap":
            scores = torch.tanh(scores / 5.0) * 5.0
        if case.mask == "bias":  # an ALiBi-like slope: a bias, not a mask
            scores = scores - 0.5 * (torch.arange(s1)[:, None] - torch.arange(s2)[None, :]).abs().to(q.dtype)
        if allowed is not None:
            scores = scores + torch.where(allowed, 0.0, torch.finfo(q.dtype).min).to(q.dtype)
        probabilities = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(torch.nn.functional.dropout(probabilities, p=0.0, training=False), v)


def _inputs(case: Case, batch: int, length: int, seed: int) -> dict:
    """q, k, v and (for a padded case) a padding mask: left padding of a few keys, and one
    sequence of padding alone (its rows keep no key)."""
    generator = torch.Generator().manual_seed(seed)
    shapes = {"q": (batch, N1, length, D), "k": (batch, case.kv, length, D), "v": (batch, case.kv, length, D)}
    inputs = {n: torch.randn(s, generator=generator).to(case.dtype) for n, s in shapes.items()}
    if case.mask in ("padding", "both") or (case.spelling == "sdpa" and case.mask == "bias"):
        mask = torch.ones(batch, length, dtype=torch.int64)
        mask[0, :2] = 0
        # ONNX Runtime's own Attention gives a row without keys 0 under a float mask where torch
        # gives the mean: that row is left out where the model (left alone) is ORT's Attention.
        if not (case.mask == "bias" and case.opset >= 23):
            mask[-1] = 0
        inputs["attention_mask"] = mask
    return inputs


def export(case: Case):
    inputs = _inputs(case, B, S, 0)
    dims = {0: torch.export.Dim("batch"), 2: torch.export.Dim("sequence")}
    shapes = {n: ({0: dims[0], 1: dims[2]} if n == "attention_mask" else dims) for n in inputs}
    return export_torch(
        Attention(case), inputs, dynamic_shapes=shapes if case.dynamic else None, opset=case.opset
    )


def fused_nodes(model):
    return [n for n in model.graph.node if n.op_type == "FlashAttentionScore"]


def float_expands(model) -> int:
    """Expand nodes with a floating-point output: a copy of K or V (the masks' are bool or int)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {
        v.name: v.type.tensor_type.elem_type for v in [*inferred.graph.value_info, *inferred.graph.output]
    }
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
    return sum(n.op_type == "Expand" and types.get(n.output[0]) in floats for n in model.graph.node)


def check_against_torch(model, module, case: Case, sizes):
    for seed, (batch, length) in enumerate(sizes):
        inputs = _inputs(case, batch, length, seed + 1)
        with torch.no_grad():
            expected = module(**inputs).float().numpy()
        feeds = {n: t.numpy() for n, t in inputs.items()}
        for native in (True, False):
            (out,) = make_session(model, native=native).run(feeds)
            error = relative_error(out.astype(np.float32), expected)
            assert error < TOLERANCE[case.dtype], (
                f"{'native' if native else 'portable'} {batch}x{length}: {error:.2e}"
            )


CAUSAL_3 = {"sparse_mode": 3}
CAUSAL_2 = {"sparse_mode": 2}
FUSED = [
    Case("eager", "causal", attributes=CAUSAL_3),
    Case("eager", "causal", kv=N1, attributes=CAUSAL_3),
    Case("eager", "causal", opset=23, attributes=CAUSAL_3),
    Case("eager", "causal", dtype=torch.float16, attributes=CAUSAL_3),
    Case("eager", "none", attributes={"sparse_mode": 0}),
    Case("eager", "window", attributes={"sparse_mode": 0, "pre_tokens": WINDOW - 1, "next_tokens": 0}),
    Case("sdpa", "is_causal", attributes=CAUSAL_2),
    Case("sdpa", "is_causal", dynamic=True, attributes=CAUSAL_2),
    Case("sdpa", "is_causal", opset=23, attributes=CAUSAL_2),
    Case("sdpa", "is_causal", opset=23, dynamic=True, attributes=CAUSAL_2),
    Case("sdpa", "causal", attributes=CAUSAL_3),
    Case("sdpa", "none", kv=N1, attributes={"sparse_mode": 0}),
    Case("sdpa", "window", opset=23, attributes={"pre_tokens": WINDOW - 1, "next_tokens": 0}),
    # A row without keys: torch's SDPA gives it 0, as the op does (the exporter's opset-18
    # decomposition fills with dtype.min and gives the mean: the fused graph is torch's).
    Case("sdpa", "rowless"),
    Case("sdpa", "padding"),
    Case("sdpa", "padding", opset=23),
    Case("sdpa", "both"),
    Case("sdpa", "both", opset=23),
    Case("sdpa", "both", dynamic=True),
    Case("sdpa", "both", opset=23, dynamic=True),
]
LEFT_ALONE = [
    # softmax over transformers' finfo.min gives a row without keys the mean of the values, and
    # its gradient reaches q and k; the op gives 0. A run-time mask may always leave one.
    Case("eager", "padding", fused=0),
    Case("eager", "both", fused=0),
    Case("eager", "rowless", fused=0),
    Case("eager", "causal", dynamic=True, fused=0),
    Case("sdpa", "bias", fused=0),  # a float mask of finfo.min: the mean again
    Case("sdpa", "bias", opset=23, fused=0),
    Case("eager", "bias", fused=0),
    Case("eager", "softcap", fused=0),
]


@pytest.mark.parametrize("case", FUSED + LEFT_ALONE, ids=[c.id for c in FUSED + LEFT_ALONE])
def test_attention_fuses_exactly(case):
    model = export(case)
    fused = fuse(model)
    nodes = fused_nodes(fused)
    assert len(nodes) == case.fused
    ops = collections.Counter(n.op_type for n in fused.graph.node)
    if case.fused:
        assert not ops["Softmax"] and not ops["Attention"]
        assert float_expands(fused) == 0  # K and V are read before their repetition
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in nodes[0].attribute}
        assert attributes["input_layout"] == b"BNSD" and attributes["head_num"] == N1
        assert {k: attributes.get(k, 0) for k in case.attributes} == case.attributes
        onnx.checker.check_model(fused, full_check=True)
    sizes = [(B, S), (3, 5)] if case.dynamic else [(B, S)]
    check_against_torch(fused, Attention(case), case, sizes)


def test_rows_without_keys_take_torchs_gradients():
    # SDPA with padding and causal: rows without keys give 0 and send no gradient, in torch and
    # in FlashAttentionScoreGrad.
    case = Case("sdpa", "both", opset=23)
    weight = torch.randn(B, N1, S, D, generator=torch.Generator().manual_seed(5))

    class Loss(torch.nn.Module):
        def forward(self, q, k, v, attention_mask):
            return (Attention(case)(q, k, v, attention_mask) * weight).sum()

    inputs = _inputs(case, B, S, 7)
    training = build_training_model(export_torch(Loss(), inputs, opset=23), "loss", ["q", "k", "v"])
    assert collections.Counter(n.op_type for n in training.graph.node)["FlashAttentionScoreGrad"] == 1
    leaves = {n: t.clone().requires_grad_(n != "attention_mask") for n, t in inputs.items()}
    Loss()(**leaves).backward()
    feeds = {n: t.numpy() for n, t in inputs.items()}
    for native in (True, False):
        results = dict(
            zip(
                [o.name for o in training.graph.output],
                make_session(training, native=native).run(feeds),
                strict=True,
            )
        )
        for name in ("q", "k", "v"):
            assert (
                relative_error(results[f"{name}_grad"], leaves[name].grad.numpy()) < TOLERANCE[torch.float32]
            ), name


# Dropout after the softmax: fused where it drops nothing (no training_mode), not where it trains.
@script()
def idle_dropout(q: FLOAT[B, N1, S, D], k: FLOAT[B, N1, S, D], v: FLOAT[B, N1, S, D]) -> FLOAT[B, N1, S, D]:
    scores = op.Mul(op.MatMul(q, op.Transpose(k, perm=[0, 1, 3, 2])), 0.25)
    dropped, _ = op.Dropout(op.Softmax(scores, axis=-1), 0.1)
    return op.MatMul(dropped, v)


@script()
def training_dropout(
    q: FLOAT[B, N1, S, D], k: FLOAT[B, N1, S, D], v: FLOAT[B, N1, S, D]
) -> FLOAT[B, N1, S, D]:
    scores = op.Mul(op.MatMul(q, op.Transpose(k, perm=[0, 1, 3, 2])), 0.25)
    dropped, _ = op.Dropout(op.Softmax(scores, axis=-1), 0.1, True)
    return op.MatMul(dropped, v)


@pytest.mark.parametrize(
    "function, count", [(idle_dropout, 1), (training_dropout, 0)], ids=["idle", "training"]
)
def test_a_dropout_is_fused_only_where_it_drops_nothing(function, count):
    model = function.to_model_proto()
    fused = fuse(model)
    assert len(fused_nodes(fused)) == count
    if count:
        rng = np.random.default_rng(0)
        feeds = {n: rng.standard_normal((B, N1, S, D)).astype(np.float32) for n in "qkv"}
        q, k, v = (feeds[n].astype(np.float64) for n in "qkv")
        scores = 0.25 * q @ k.transpose(0, 1, 3, 2)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        expected = (p / p.sum(-1, keepdims=True)) @ v
        for native in (True, False):
            assert relative_error(make_session(fused, native=native).run(feeds)[0], expected) < 1e-6


# Hugging Face models with a padding mask: (architecture, attention implementation, opset,
# dynamic, settings, FlashAttentionScore nodes expected).
HF = [
    ("llama", "sdpa", 18, False, {}, 2),
    ("llama", "sdpa", 23, False, {}, 2),
    ("llama", "sdpa", 23, True, {}, 2),
    ("qwen2", "sdpa", 18, True, {}, 2),
    ("mistral", "sdpa", 23, False, {"sliding_window": 4}, 2),
    ("llama", "eager", 18, False, {}, 0),  # a run-time padding mask under eager softmax
    ("gemma2", "eager", 18, False, {"sliding_window": 4}, 0),  # softcapping, and the padding
]
CONFIGS = {
    "llama": "LlamaConfig",
    "qwen2": "Qwen2Config",
    "mistral": "MistralConfig",
    "gemma2": "Gemma2Config",
}


@pytest.mark.parametrize(
    "arch, attention, opset, dynamic, settings, count",
    HF,
    ids=[f"{h[0]}-{h[1]}-opset{h[2]}-{'dynamic' if h[3] else 'static'}" for h in HF],
)
def test_hugging_face_attention_with_padding(arch, attention, opset, dynamic, settings, count):
    torch.manual_seed(0)
    config = getattr(transformers, CONFIGS[arch])(**{**hf.SIZES, **settings})
    lm = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attention).eval()

    def batch(size, length, seed):
        generator = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, hf.SIZES["vocab_size"], (size, length), generator=generator)
        mask = torch.ones(size, length, dtype=torch.int64)
        mask[0, :3] = 0  # left padding: its first rows keep no key
        return {"input_ids": ids, "attention_mask": mask}

    dims = {0: torch.export.Dim("batch"), 1: torch.export.Dim("sequence")}
    data = batch(2, hf.SEQUENCE, 0)
    model = export_torch(lm, data, dynamic_shapes={n: dims for n in data} if dynamic else None, opset=opset)
    fused = fuse(model)
    assert len(fused_nodes(fused)) == count
    if count:
        assert float_expands(fused) == 0
    for seed, (size, length) in enumerate([(2, hf.SEQUENCE), (3, 6)] if dynamic else [(2, hf.SEQUENCE)]):
        inputs = batch(size, length, seed + 1)
        with torch.no_grad():
            expected = lm(**inputs).logits.numpy()
        for native in (True, False):
            (logits,) = make_session(fused, native=native).run({n: t.numpy() for n, t in inputs.items()})
            assert relative_error(logits, expected) < TOLERANCE[torch.float32]


@pytest.mark.parametrize("length", [16, 600])
def test_a_static_exports_causal_mask_becomes_a_sparse_mode(length):
    """Without a padding mask, transformers' causal mask is computed from constants alone: past
    onnxscript's folding limits (600 x 600) too, it is folded and read as sparse_mode 3, so the
    kernels skip the masked half instead of applying an S x S mask."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**{**hf.SIZES, "max_position_embeddings": length})
    lm = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
    ids = torch.randint(0, hf.SIZES["vocab_size"], (1, length), generator=torch.Generator().manual_seed(1))
    fused = fuse(export_torch(lm, {"input_ids": ids}))
    nodes = fused_nodes(fused)
    assert len(nodes) == 2
    for node in nodes:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attrs.get("sparse_mode") in (2, 3) and (len(node.input) < 4 or not node.input[3])
    with torch.no_grad():
        expected = lm(input_ids=ids).logits.numpy()
    (logits,) = make_session(fused, native=True).run({"input_ids": ids.numpy()})
    assert relative_error(logits, expected) < TOLERANCE[torch.float32]
