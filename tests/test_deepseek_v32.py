"""A Hugging Face DeepSeek-V3.2 (models/hf/deepseek_v32_b*.onnx, made by models/deepseek_v32.py
with export_torch): fuse turns each layer's indexer into LightningIndexer, keeping the logits and
transformers' selection; indexer_warmup + build_training_model give the indexer's training graph
(LightningIndexerGrad), whose loss and gradients equal PyTorch autograd's of the same loss on the
same weights, native and portable, and whose AdamW steps follow torch.optim.AdamW's. The batch-1
export has eager attention (a float mask, the attention's Softmax), the batch-2 one SDPA
(transformers' default: a boolean mask, ONNX Attention); the README's example exports one live."""

import collections
import functools
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_oracles import relative_error

from ort_ascend_ops import fuse, make_session
from ort_ascend_ops.examples import deepseek_v32 as ds
from ort_ascend_ops.examples import indexer_loss
from ort_ascend_ops.export import parameter_names
from ort_ascend_ops.fusion import fold_constants
from ort_ascend_ops.training import INDEXER_LOSS, GradientError, build_training_model, indexer_warmup
from ort_ascend_ops.training.api import CheckpointState, Module, Optimizer
from ort_ascend_ops.training.artifacts import generate_artifacts
from ort_ascend_ops.training.optim import AdamW

FIXTURES = Path(__file__).parents[1] / "models" / "hf"
FLOAT32_TOLERANCE = 1e-5
# Scores this close (relative to the row's largest) count as tied: the order among them is the
# summation order's.
TIE = 1e-5
FUSED = {
    "RmsNorm": ds.NORMS,
    "RotaryPositionEmbedding": ds.ROTATED + ds.MLA_ROTATED,
    "LightningIndexer": ds.LAYERS,
    "SwiGlu": ds.MLPS,
}
GRAD_OPS = {"LightningIndexerGrad": ds.LAYERS, "RotaryPositionEmbeddingGrad": ds.ROTATED}


@functools.cache
def exported(size: int) -> onnx.ModelProto:
    return onnx.load(FIXTURES / f"{ds.name(size)}.onnx")


@functools.cache
def expected(size: int) -> dict[str, np.ndarray]:
    return dict(np.load(FIXTURES / f"{ds.name(size)}.npz"))


@functools.cache
def fused(size: int) -> onnx.ModelProto:
    return fuse(exported(size))


@functools.cache
def warm(size: int) -> onnx.ModelProto:
    return indexer_warmup(fused(size))


@functools.cache
def training(size: int) -> onnx.ModelProto:
    model = warm(size)
    return build_training_model(model, INDEXER_LOSS, parameter_names(model))


def ops(model, suffix=""):
    return collections.Counter(
        n.op_type for n in model.graph.node if n.domain == "ort_ascend_ops" and n.op_type.endswith(suffix)
    )


def outputs_of(model, inputs, native=True):
    names = [o.name for o in model.graph.output]
    feeds = {i.name: inputs[i.name] for i in model.graph.input}
    return dict(zip(names, make_session(model, native=native).run(feeds), strict=True))


@pytest.mark.parametrize("size", ds.BATCHES)
def test_fuse_makes_one_indexer_per_layer_and_keeps_the_outputs(size):
    model = fused(size)
    assert ops(model) == FUSED
    onnx.checker.check_model(model, full_check=True)
    data = expected(size)
    before = outputs_of(exported(size), data, native=False)
    for native in (True, False):
        after = outputs_of(model, data, native)
        assert after.keys() == before.keys() == {"loss", "logits"}
        for name, value in after.items():
            assert relative_error(value, before[name]) < FLOAT32_TOLERANCE, name


def _with_selection_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for node in [n for n in model.graph.node if n.op_type == "LightningIndexer"]:
        model.graph.output.append(
            onnx.helper.make_tensor_value_info(node.output[0], onnx.TensorProto.INT32, None)
        )
    return model


@pytest.mark.parametrize("size", ds.BATCHES)
def test_the_fused_selection_equals_transformers_where_scores_are_not_tied(size):
    """Slot by slot, on the valid slots; a tie may go either way, but then later layers see other
    attention outputs: a layer's token is compared only while every earlier layer selected the
    same keys for it and all tokens before it."""
    data = expected(size)
    results = outputs_of(_with_selection_outputs(fused(size)), data)
    selections = [v for k, v in results.items() if k not in ("loss", "logits")]
    assert len(selections) == ds.LAYERS
    # Per sequence: tokens before this one have had the same selections in every layer so far.
    same_until = np.full(size, ds.SEQUENCE)
    compared = 0
    for layer, ours in enumerate(selections):
        theirs, scores = data[f"transformers/indices{layer}"], data[f"transformers/scores{layer}"]
        for b in range(size):
            first_different = same_until[b]
            for t in range(same_until[b]):
                valid = min(ds.TOP_K, t + 1)
                assert (ours[b, t, valid:] == -1).all()  # slots past the allowed keys
                row = scores[b, t, : t + 1]
                for k in range(valid):
                    tied = np.abs(row - row[theirs[b, t, k]]) <= TIE * np.abs(row).max()
                    assert tied[ours[b, t, k]], (layer, b, t, k)  # the same key, or one tied with it
                    compared += tied.sum() == 1
                if set(ours[b, t, :valid]) != set(theirs[b, t, :valid]):
                    first_different = min(first_different, t)
            same_until[b] = first_different
    assert compared > 0.5 * ds.LAYERS * size * ds.SEQUENCE * ds.TOP_K


def test_the_warmup_trains_the_indexer_parameters_alone():
    model = warm(2)
    assert parameter_names(model) == ds.indexer_parameters()
    assert [o.name for o in model.graph.output] == [INDEXER_LOSS]
    assert [i.name for i in model.graph.input] == ["input_ids"]  # the LM loss and its labels pruned


@pytest.mark.parametrize("native", [True, False], ids=["native", "portable"])
@pytest.mark.parametrize("size", ds.BATCHES)
def test_indexer_gradients_equal_torch_autograd(size, native):
    model = training(size)
    assert ops(model, "Grad") == GRAD_OPS
    data = expected(size)
    results = outputs_of(model, data, native)
    assert relative_error(results[INDEXER_LOSS], data["loss"]) < FLOAT32_TOLERANCE
    for name in ds.indexer_parameters():
        assert relative_error(results[f"{name}_grad"], data[f"grad/{name}"]) < FLOAT32_TOLERANCE, name


def test_adamw_steps_follow_torch_optim(tmp_path):
    data = expected(2)
    paths = generate_artifacts(warm(2), optimizer=AdamW(lr=ds.ADAMW_LR), artifact_directory=tmp_path)
    module = Module(paths["training"], CheckpointState.load_checkpoint(paths["checkpoint"]), threads=2)
    optimizer = Optimizer(paths["optimizer"], module)
    losses = []
    for _ in range(ds.ADAMW_STEPS + 1):
        losses.append(float(module(data["input_ids"])))
        optimizer.step()
        module.lazy_reset_grad()
    np.testing.assert_allclose(losses, data["adamw_losses"], rtol=FLOAT32_TOLERANCE)
    assert all(a > b for a, b in zip(losses, losses[1:], strict=False))


def test_fuse_leaves_an_indexer_whose_mask_is_not_causal():
    # The SDPA export masks the index scores with Where(excluded, -inf, scores), excluded a
    # constant once folded; a sliding window of 5 keys instead of the causal mask is not our op.
    model = fold_constants(exported(2))
    producers = {o: n for n in model.graph.node for o in n.output}
    constants = {i.name: i for i in model.graph.initializer}
    window = np.tril(np.ones((ds.SEQUENCE, ds.SEQUENCE), bool), -5)  # keys 5 or more behind
    for top in [n for n in model.graph.node if n.op_type == "TopK"]:
        masking = producers[top.input[0]]
        assert masking.op_type == "Where"
        excluded = constants[masking.input[0]]
        changed = onnx.numpy_helper.to_array(excluded) | window
        excluded.CopyFrom(onnx.numpy_helper.from_array(changed, excluded.name))
    # The attention its selection masks is fused (an SDPA boolean mask: a row without keys gives 0
    # there too), and gives the unfused model's outputs.
    result = fuse(model)
    assert ops(result) == {
        "RmsNorm": ds.NORMS,
        "RotaryPositionEmbedding": ds.ROTATED + ds.MLA_ROTATED,
        "FlashAttentionScore": ds.LAYERS,
        "SwiGlu": ds.MLPS,
    }
    inputs = expected(2)
    for name, out in outputs_of(model, inputs, native=False).items():
        assert relative_error(outputs_of(result, inputs)[name], out) < 1e-5, name


def test_the_warmup_refuses_a_model_without_an_indexer_or_its_attention():
    llama = onnx.load(FIXTURES / "llama_static_b2_opset23_ce.onnx")
    with pytest.raises(GradientError, match="no DeepSeek-V3.2 indexer"):
        indexer_warmup(llama)
    with pytest.raises(GradientError, match="no attention Softmax reads the selection of LightningIndexer"):
        indexer_warmup(indexer_loss.forward_model())  # its target p is an input
