"""LoRA, as PEFT users train it: ``export_torch`` of a ``peft`` model and ``generate_artifacts`` give
the loss and every adapter gradient torch + peft give on the same batch (fp32, and bf16-mixed within
torch autocast's own drift), the base weights frozen with no gradient, optimizer state or
weight-gradient product; then ``train HF_DIR --lora-r`` on chat data in a child process, its
adapter directory loaded by ``PeftModel`` with no missing or unexpected key, the merged model
giving the adapted model's logits, ``--resume`` and ``--adapter`` going on; and every bad LoRA
input refused with exit code 2 and nothing written."""

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from model_oracles import tensors_distance  # noqa: E402

from ort_ascend_ops.examples.chat import write_chat_examples  # noqa: E402
from ort_ascend_ops.examples.hf_models import write_model_directory  # noqa: E402

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SEQ, BATCH, STEPS, LR = 96, 4, 8, 3e-3
SIZES = {"max_position_embeddings": SEQ}
DRIFT_MULTIPLE = 3.0  # as tests/test_precision.py: ours within 3x torch's autocast drift


def texts():
    return [p.read_text() for p in sorted((STDLIB / "email").glob("*.py"))]


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    path = tmp_path_factory.mktemp("base")
    write_model_directory(path, texts(), "llama", sizes=SIZES)
    return path


@pytest.fixture(scope="module")
def chat(tmp_path_factory):
    return write_chat_examples(tmp_path_factory.mktemp("data") / "chat.jsonl", 60)


def peft_model(directory, target="all-linear", seed=0):
    """The directory's model with adapters whose B is random too (PEFT's B = 0 would leave A no
    gradient to compare)."""
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(directory)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=target, init_lora_weights=False)
    return peft.get_peft_model(model, config)


def labelled_batch(vocab: int, seed: int):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, (2, 24))
    labels = ids.copy()
    labels[:, :9] = -100  # a prompt off the loss
    return ids, labels


def torch_loss_and_grads(model, ids, labels, precision):
    model.zero_grad()
    low = {"fp32": None, "bf16-mixed": torch.bfloat16}[precision]
    with torch.autocast("cpu", dtype=low or torch.float32, enabled=low is not None):
        loss = model(input_ids=torch.from_numpy(ids), labels=torch.from_numpy(labels)).loss
    loss.backward()
    grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters() if p.requires_grad}
    return float(loss), grads


@pytest.fixture(scope="module")
def exported(directory):
    from ort_ascend_ops.export import export_torch

    model = peft_model(directory)
    ids, labels = labelled_batch(model.config.vocab_size, 0)
    return model, export_torch(
        model, {"input_ids": torch.from_numpy(ids), "labels": torch.from_numpy(labels)}
    )


@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed"])
def test_the_loss_and_every_adapter_gradient_are_torch_and_peft(exported, precision, tmp_path):
    from ort_ascend_ops.training.api import CheckpointState, Module
    from ort_ascend_ops.training.artifacts import generate_artifacts

    model, onnx_model = exported
    paths = generate_artifacts(onnx_model, loss=None, artifact_directory=tmp_path, precision=precision)
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state)
    ids, labels = labelled_batch(model.config.vocab_size, 1)
    loss, grads = torch_loss_and_grads(model, ids, labels, precision)
    ours_loss = float(module(ids, labels))
    ours = {n: state.parameters[n].grad for n in grads}
    if precision == "fp32":
        assert abs(ours_loss - loss) <= 1e-5 * abs(loss)
        assert tensors_distance(ours, grads) <= 1e-5
    else:  # within DRIFT_MULTIPLE times the distance of torch's autocast from its float32 run
        _, fp32 = torch_loss_and_grads(model, ids, labels, "fp32")
        # One loss's drift can vanish by chance: the loss is held to bfloat16's unit roundoff.
        assert abs(ours_loss - loss) <= 2.0**-9 * abs(loss)
        assert tensors_distance(ours, grads) <= DRIFT_MULTIPLE * tensors_distance(fp32, grads)


def _weight_gradient_products(path, matrices: list[list[int]]) -> int:
    """The MatMul/Gemm nodes of the model at ``path`` whose result has the shape of one of
    ``matrices`` (either way round): a weight's gradient (activations have a batch axis)."""
    model = onnx.shape_inference.infer_shapes(onnx.load(path))
    shapes = {
        v.name: [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
        for v in [*model.graph.value_info, *model.graph.output]
    }
    wanted = [*matrices, *(m[::-1] for m in matrices)]
    return sum(
        n.op_type in ("MatMul", "Gemm") and shapes.get(n.output[0]) in wanted for n in model.graph.node
    )


def test_the_base_has_no_gradient_no_optimizer_state_and_no_weight_gradient_product(exported, tmp_path):
    from ort_ascend_ops.training.artifacts import generate_artifacts
    from ort_ascend_ops.training.checkpoint import read
    from ort_ascend_ops.training.optim import AdamW

    model, onnx_model = exported
    adapters = {n for n, p in model.named_parameters() if p.requires_grad}
    base = {n for n, p in model.named_parameters() if not p.requires_grad}
    lora = generate_artifacts(onnx_model, loss=None, optimizer=AdamW(), artifact_directory=tmp_path / "lora")
    everything = generate_artifacts(
        onnx_model,
        requires_grad=sorted(adapters | base),
        frozen_params=[],
        loss=None,
        artifact_directory=tmp_path / "all",
    )
    training = onnx.load(lora["training"])
    assert {o.name.removesuffix("_grad") for o in training.graph.output[1:]} == adapters
    optimizer_inputs = {i.name for i in onnx.load(lora["optimizer"]).graph.input}
    assert not any(name.startswith(tuple(base)) for name in optimizer_inputs)
    contents = read(lora["checkpoint"])
    assert {n for n, on in contents.requires_grad.items() if not on} == base
    matrices = sorted({tuple(contents.parameters[n].shape) for n in base if contents.parameters[n].ndim == 2})
    matrices = [list(m) for m in matrices]
    # The full fine-tune has one weight-gradient product per base matrix (lm_head's included);
    # LoRA none. And fewer nodes: ``bench lora`` gives the counts and the peak memory.
    full_products = _weight_gradient_products(everything["training"], matrices)
    assert full_products == sum(contents.parameters[n].ndim == 2 for n in base) > 0
    assert _weight_gradient_products(lora["training"], matrices) == 0
    assert len(training.graph.node) < len(onnx.load(everything["training"]).graph.node)


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "ort_ascend_ops", "train", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=900,
    )


def train_args(directory, chat, out, *extra):
    return [directory, "--data", chat, "--steps", STEPS, "--batch", BATCH, "--seq", SEQ, "--lr", LR,
            "--out", out, "--eval-every", 4, "--lora-r", 4, "--lora-target", "all-linear", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def trained(directory, chat, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "out"
    result = cli(*train_args(directory, chat, out, "--merge"))
    assert result.returncode == 0, result.stderr
    return out, result.stdout


def test_peft_loads_the_adapter_and_the_merged_model_gives_its_logits(directory, trained):
    from safetensors.torch import load_file

    out, stdout = trained
    assert "wrote the LoRA adapter" in stdout and "(of " in stdout
    base = transformers.AutoModelForCausalLM.from_pretrained(directory)
    start = {k: v.clone() for k, v in base.state_dict().items()}
    adapted = peft.PeftModel.from_pretrained(base, out)
    stored = load_file(out / "adapter_model.safetensors")
    expected = peft.get_peft_model_state_dict(adapted)
    assert set(stored) == set(expected)  # no missing, no unexpected key
    assert all(torch.equal(stored[k], expected[k]) for k in stored)
    assert any(k.endswith("lora_B.weight") and stored[k].abs().max() > 0 for k in stored)  # B trained
    targets = json.loads((out / "adapter_config.json").read_text())["target_modules"]
    assert {t.rsplit(".", 1)[-1] for t in targets} == {
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"
    }  # fmt: skip
    merged, info = transformers.AutoModelForCausalLM.from_pretrained(out / "merged", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    ids = torch.arange(20).reshape(1, 20) % base.config.vocab_size
    with torch.no_grad():
        torch.testing.assert_close(merged(ids).logits, adapted(ids).logits, rtol=1e-4, atol=1e-4)
    untouched = transformers.AutoModelForCausalLM.from_pretrained(directory).state_dict()
    assert all(torch.equal(untouched[k], start[k]) for k in start)  # the base directory as it was


def test_our_eval_model_gives_peft_models_held_out_loss(directory, chat, trained):
    from ort_ascend_ops.trainer.chat_data import Examples
    from ort_ascend_ops.training.api import CheckpointState, Module

    out, _ = trained
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    examples = Examples.from_paths([str(chat)], tokenizer, SEQ)
    adapted = peft.PeftModel.from_pretrained(
        transformers.AutoModelForCausalLM.from_pretrained(directory), out
    )
    state = CheckpointState.load_checkpoint(out / "checkpoint.safetensors")
    module = Module(
        out / "artifacts" / "training_model.onnx", state, out / "artifacts" / "eval_model.onnx"
    ).eval()
    rows = examples.rows("held_out", 0, BATCH, SEQ)
    ids, labels = rows.ids, rows.labels
    with torch.no_grad():
        theirs = adapted(input_ids=torch.from_numpy(ids), labels=torch.from_numpy(labels)).loss.item()
    assert abs(float(module(ids, labels)) - theirs) <= 1e-5 * theirs


def test_resume_and_an_adapter_directory_go_on(directory, chat, trained, tmp_path):
    from ort_ascend_ops.trainer.chat_data import Examples

    out, _ = trained
    resumed = cli(*train_args(directory, chat, out, "--resume", "--steps", STEPS + 2))
    assert resumed.returncode == 0, resumed.stderr
    assert f"steps {STEPS + 1}..{STEPS + 2}" in resumed.stdout
    # A new run from the adapter: its first step's loss is the adapted model's on that batch.
    again = tmp_path / "again"
    args = [
        directory,
        "--data",
        chat,
        "--steps",
        1,
        "--batch",
        BATCH,
        "--seq",
        SEQ,
        "--out",
        again,
        "--adapter",
        out,
    ]
    result = cli(*args)
    assert result.returncode == 0, result.stderr
    first = float(next(line for line in (again / "losses.csv").read_text().splitlines()[1:]).split(",")[1])
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    rows = Examples.from_paths([str(chat)], tokenizer, SEQ).rows("train", 1, BATCH, SEQ)
    ids, labels = rows.ids, rows.labels
    adapted = peft.PeftModel.from_pretrained(
        transformers.AutoModelForCausalLM.from_pretrained(directory), out
    )
    with torch.no_grad():
        theirs = adapted(input_ids=torch.from_numpy(ids), labels=torch.from_numpy(labels)).loss.item()
    assert abs(first - theirs) <= 1e-5 * theirs


def _refusals(directory, chat, trained, tmp_path):
    """Each bad input: the extra arguments (or a model of its own) and what the error says."""
    other = tmp_path / "other"
    write_model_directory(other, texts(), "llama", sizes=SIZES | {"hidden_size": 48})
    other_adapter = tmp_path / "other-adapter"
    peft.get_peft_model(
        transformers.AutoModelForCausalLM.from_pretrained(other),
        peft.LoraConfig(r=4, target_modules="all-linear"),
    ).save_pretrained(other_adapter)
    bare = tmp_path / "bare"
    write_model_directory(bare, texts(), "llama", sizes=SIZES, chat=False)
    bad_line = tmp_path / "bad.jsonl"
    bad_line.write_text(Path(chat).read_text() + '{"messages": [{"role": "user"}]}\n')
    out, _ = trained
    return {
        "an adapter of another base": (
            directory,
            ["--adapter", other_adapter],
            "an adapter of another model (it was made for",
        ),
        "another r": (directory, ["--adapter", out, "--lora-r", 8], "--lora-r 8 contradicts the adapter"),
        "a target naming no module": (directory, ["--lora-r", 4, "--lora-target", "nope"], "--lora-target: "),
        "lora options without lora": (directory, ["--lora-alpha", 4], "--lora-alpha sets up LoRA"),
        "merge without lora": (directory, ["--merge"], "--merge merges LoRA adapters"),
        "no chat template": (
            bare,
            [],
            "chat.jsonl:1: chat messages, and the model's tokenizer has no chat template",
        ),
        "a malformed line": (
            directory,
            ["--data", bad_line],
            f"{bad_line}:61: messages[0] must be an object",
        ),
    }


def test_every_bad_input_is_refused_naming_it_and_nothing_is_written(
    directory, chat, trained, tmp_path, capsys
):
    from ort_ascend_ops.__main__ import main

    for what, (model, extra, said) in _refusals(directory, chat, trained, tmp_path).items():
        out = tmp_path / "out" / what.replace(" ", "-")
        args = [model, "--data", chat, "--steps", 1, "--batch", BATCH, "--seq", SEQ, "--out", out, *extra]
        assert main(["train", *map(str, args)]) == 2, what
        err = capsys.readouterr().err
        assert said in err, (what, err)
        assert not out.exists(), what
