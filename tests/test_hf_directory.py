"""``train HF_DIR`` from outside, as a Hugging Face user runs it: a tiny directory of our own (GQA,
tied embeddings, q/k/v biases, a BPE tokenizer trained with ``tokenizers``) trained through the CLI
in a child process, then checked in torch: the output loads with no missing or unexpected keys,
every weight moved within AdamW's reach, the held-out loss fell, and our eval model on our
checkpoint gives the saved model's loss. Also sharded and bfloat16 directories, the data formats,
and every bad input refused with exit code 2 and nothing written."""

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ort_ascend_ops.examples.hf_models import write_model_directory  # noqa: E402

STDLIB = Path(sysconfig.get_paths()["stdlib"])
DATA = sorted(str(p) for p in (STDLIB / "email").glob("*.py"))
STEPS, LR, BATCH, SEQ = 12, 3e-3, 4, 32


def texts():
    return [Path(p).read_text() for p in DATA]


def cli(*args, file_size_limit=None):
    """``train`` in a child process; ``file_size_limit``: bytes no file may grow past
    (RLIMIT_FSIZE, as a full disk: writes fail with EFBIG)."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run(
        [sys.executable, "-m", "ort_ascend_ops", "train", *map(str, args)],
        capture_output=True,
        text=True,
        preexec_fn=None if file_size_limit is None else limit,
        timeout=900,
    )


def train_args(model, out, *extra):
    return [model, "--data", *DATA, "--steps", STEPS, "--batch", BATCH, "--seq", SEQ, "--lr", LR, "--out", out,
            "--eval-every", 6, *extra]  # fmt: skip


@pytest.fixture(scope="module")
def directory(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen2")
    write_model_directory(path, texts())
    return path


def held_out_loss(model, tokenizer):
    """The mean loss over windows of the held-out documents (every 20th, as the CLI holds out)."""
    from ort_ascend_ops.trainer import Corpus

    corpus = Corpus.from_paths(DATA, tokenizer=tokenizer)
    with torch.no_grad():
        losses = [
            model(input_ids=torch.from_numpy(w), labels=torch.from_numpy(w)).loss.item()
            for w in (corpus.batch("held_out", i, BATCH, SEQ, 0) for i in range(4))
        ]
    return float(np.mean(losses)), corpus


@pytest.fixture(scope="module")
def trained(directory, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "run"
    result = cli(*train_args(directory, out))
    assert result.returncode == 0, result.stderr
    return out, result.stdout


def test_the_output_loads_and_every_weight_trained_within_adamw_reach(directory, trained):
    out, stdout = trained
    model, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    start = transformers.AutoModelForCausalLM.from_pretrained(directory)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # still tied
    assert model.model.layers[0].self_attn.q_proj.bias is not None
    # AdamW moves an element by at most lr * (|m̂| / sqrt(v̂)) <= ~lr a step, plus the decay.
    reach = STEPS * LR * 1.5
    trained_weights, start_weights = model.state_dict(), start.state_dict()
    for name, value in trained_weights.items():
        moved = (value - start_weights[name]).abs()
        assert moved.max() > 0, f"{name} did not train"
        assert moved.max() <= reach + LR * STEPS * 0.01 * value.abs().max(), f"{name} moved {moved.max()}"
    for line in ("wrote the Hugging Face model", "best held-out loss", "tokens/s"):
        assert line in stdout


def test_the_held_out_loss_fell_and_our_eval_model_gives_the_saved_models_loss(directory, trained):
    from ort_ascend_ops.training.api import CheckpointState, Module

    out, _ = trained
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    before, _ = held_out_loss(transformers.AutoModelForCausalLM.from_pretrained(directory), tokenizer)
    after, corpus = held_out_loss(transformers.AutoModelForCausalLM.from_pretrained(out), tokenizer)
    assert after < before
    state = CheckpointState.load_checkpoint(out / "checkpoint.safetensors")
    module = Module(
        out / "artifacts" / "training_model.onnx", state, out / "artifacts" / "eval_model.onnx"
    ).eval()
    ours = np.mean(
        [float(module(w, w)) for w in (corpus.batch("held_out", i, BATCH, SEQ, 0) for i in range(4))]
    )
    assert abs(ours - after) <= 1e-4 * after


def test_resume_goes_on_and_another_models_out_is_refused(directory, trained, tmp_path):
    out, _ = trained
    resumed = cli(*train_args(directory, out, "--resume", "--steps", STEPS + 2))
    assert resumed.returncode == 0, resumed.stderr
    assert f"steps {STEPS + 1}..{STEPS + 2}" in resumed.stdout
    other = tmp_path / "other"
    write_model_directory(other, texts(), "llama")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in out.iterdir())
    refused = cli(*train_args(other, out))
    assert refused.returncode == 2 and "holds the run of another model" in refused.stderr
    assert sorted((p.name, p.stat().st_mtime_ns) for p in out.iterdir()) == before


@pytest.mark.parametrize("kind", ["sharded", "bfloat16"])
def test_sharded_and_bfloat16_directories_come_back_as_they_were_stored(kind, tmp_path):
    source = tmp_path / "model"
    options = {"shard_size": "100KB"} if kind == "sharded" else {"dtype": torch.bfloat16}
    write_model_directory(source, texts(), **options)
    out = tmp_path / "out"
    result = cli(*train_args(source, out, "--steps", 2))
    assert result.returncode == 0, result.stderr
    model, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    if kind == "sharded":
        assert (source / "model.safetensors.index.json").exists()
    else:
        assert "stored as bfloat16" in result.stdout
        assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
        assert model.dtype == torch.bfloat16


def _breaks(directory: Path, how: str) -> str:
    """Breaks a copy of the directory one way; the word its error must carry."""
    config = directory / "config.json"
    weights = directory / "model.safetensors"
    if how == "no model_type":
        data = json.loads(config.read_text())
        del data["model_type"]
        config.write_text(json.dumps(data))
        return "model_type"
    if how == "unknown model_type":
        data = json.loads(config.read_text()) | {"model_type": "no-such-architecture"}
        config.write_text(json.dumps(data))
        return "no-such-architecture"
    if how == "config transformers cannot build":
        data = json.loads(config.read_text()) | {"num_attention_heads": 3}  # hidden 32 / 3 heads
        config.write_text(json.dumps(data))
        return str(directory)
    if how == "no weights":
        weights.unlink()
        return "model.safetensors"
    if how == "truncated weights":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
        return "model.safetensors"
    if how == "a header that lies":
        raw = bytearray(weights.read_bytes())
        size = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8 : 8 + size])
        name = next(k for k in header if k != "__metadata__")
        header[name]["data_offsets"][1] += 10**9  # past the end of the file
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        weights.write_bytes(len(text).to_bytes(8, "little") + text + bytes(raw[8 + size :]))
        return "model.safetensors"
    if how == "a shape the config does not have":
        data = json.loads(config.read_text()) | {"intermediate_size": 64}
        config.write_text(json.dumps(data))
        return "do not match"
    if how == "a missing shard":
        index = directory / "model.safetensors.index.json"
        weight_map = {"model.embed_tokens.weight": "model-00002-of-00002.safetensors"}
        index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
        return "model-00002-of-00002.safetensors"
    if how == "an unreadable tokenizer":
        (directory / "tokenizer.json").write_text("{ not json")
        return "tokenizer"
    raise AssertionError(how)


BROKEN = [
    "no model_type",
    "unknown model_type",
    "config transformers cannot build",
    "no weights",
    "truncated weights",
    "a header that lies",
    "a shape the config does not have",
    "a missing shard",
    "an unreadable tokenizer",
]


@pytest.mark.parametrize("how", BROKEN)
def test_a_broken_directory_is_refused_naming_the_file_and_nothing_is_written(
    how, directory, tmp_path, command
):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(directory, broken)
    word = _breaks(broken, how)
    out = tmp_path / "out"
    code, err = command("train", *train_args(broken, out))
    assert code == 2 and word in err and "Traceback" not in err, err
    assert not out.exists()


def test_data_too_short_or_empty_is_refused(directory, tmp_path, command):
    short = tmp_path / "short.txt"
    short.write_text("too short")
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"title": "no text field"}\n')
    for data, rule in ((short, "too little text"), (empty, "needs a string field 'text'")):
        code, err = command("train", directory, "--data", data, "--seq", SEQ, "--out", tmp_path / "out")
        assert code == 2 and rule in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_jsonl_globs_and_saved_datasets_give_the_same_documents(tmp_path):
    from ort_ascend_ops.trainer import Corpus

    datasets = pytest.importorskip("datasets")
    docs = [f"document {i}: " + "word " * 100 for i in range(60)]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    folder = tmp_path / "texts"
    folder.mkdir()
    for i, d in enumerate(docs):
        (folder / f"{i:03d}.txt").write_text(d)
    datasets.Dataset.from_dict({"text": docs}).save_to_disk(str(tmp_path / "saved"))
    corpora = [
        Corpus.from_paths([tmp_path / "data.jsonl"]),
        Corpus.from_paths([str(folder / "*.txt")]),
        Corpus.from_paths([tmp_path / "saved"]),
    ]
    expected = b"".join(d.encode() + b"\n\n" for i, d in enumerate(docs) if i % 20 != 19)
    for corpus in corpora:
        assert corpus.documents == 60
        assert corpus.train.tobytes() == expected


def test_a_full_disk_during_a_checkpoint_or_the_final_save_loses_nothing(directory, tmp_path):
    """A file-size limit one byte under the checkpoint's size: the resumed run's checkpoint cannot
    be written, the error says so, and the previous one still loads. Then one under the weights'
    size, on a resume with no step left: the Hugging Face directory cannot be written, and the
    one there stays whole."""
    from ort_ascend_ops.training.api import CheckpointState

    out = tmp_path / "out"
    assert cli(*train_args(directory, out, "--steps", 2, "--save-every", 2)).returncode == 0
    size = (out / "checkpoint.safetensors").stat().st_size
    result = cli(
        *train_args(directory, out, "--steps", 4, "--save-every", 2, "--resume"), file_size_limit=size - 1
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "writing the checkpoint of step 4" in result.stderr
    assert "the checkpoint of step 2" in result.stderr and "is intact" in result.stderr
    assert CheckpointState.load_checkpoint(out / "checkpoint.safetensors").properties["step"] == 2
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]

    weights = (out / "model.safetensors").read_bytes()
    result = cli(*train_args(directory, out, "--steps", 2, "--resume"), file_size_limit=len(weights) - 1)
    assert result.returncode == 2, result.stderr[-2000:]
    assert (
        "writing the Hugging Face model into" in result.stderr
        and "--resume writes the model again" in result.stderr
    )
    assert (out / "model.safetensors").read_bytes() == weights
    assert not (out / ".hf-staging").exists()
    transformers.AutoModelForCausalLM.from_pretrained(out)


def test_accumulated_micro_batches_give_torchs_averaged_gradients(directory, tmp_path):
    """Two micro-batches accumulated and averaged (``--grad-accum 2``'s step) against torch's
    backward of the two losses' mean on the directory's own model."""
    from model_oracles import tensors_distance

    from ort_ascend_ops.trainer import Settings, open_model
    from ort_ascend_ops.training.api import CheckpointState, Module
    from ort_ascend_ops.training.artifacts import generate_artifacts

    loaded = open_model(directory)
    loaded.load(say=lambda *_: None)
    rng = np.random.default_rng(5)
    windows = [rng.integers(0, loaded.vocab_size, (2, SEQ)) for _ in range(2)]
    model = transformers.AutoModelForCausalLM.from_pretrained(directory)
    loss = sum(model(input_ids=torch.from_numpy(w), labels=torch.from_numpy(w)).loss for w in windows) / 2
    loss.backward()
    expected = {n: p.grad.numpy() for n, p in model.named_parameters() if n != "lm_head.weight"}  # tied

    exported = loaded.export(Settings(model=str(directory), batch=2, seq=SEQ))
    paths = generate_artifacts(exported, loss=None, artifact_directory=tmp_path)
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state)
    for w in windows:
        module(*[w] * len(module.input_names()))
    module.scale_grads(0.5)
    ours = {n: state.parameters[n].grad for n in expected}
    assert tensors_distance(ours, expected) <= 1e-4


@pytest.mark.parametrize("kind", ["linear", "cosine", "constant"])
def test_the_schedules_are_transformers(kind, tmp_path):
    from ort_ascend_ops.training.api.lr_scheduler import learning_rate

    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=1e-3)
    scheduler = transformers.get_scheduler(
        f"{kind}_with_warmup" if kind == "constant" else kind,
        optimizer,
        num_warmup_steps=7,
        num_training_steps=50,
    )
    for step in range(50):
        ours = learning_rate(kind, step, 1e-3, 7, 50)
        assert ours == pytest.approx(scheduler.get_last_lr()[0], rel=1e-12, abs=1e-15)
        optimizer.step()
        scheduler.step()


@pytest.mark.parametrize("vocab", [320, 200])
def test_a_directory_without_a_tokenizer_trains_on_bytes_when_its_vocabulary_allows(vocab, tmp_path):
    from ort_ascend_ops.examples.hf_models import SIZES

    source = tmp_path / "model"  # save_pretrained of a model alone: no tokenizer files
    config = transformers.LlamaConfig(**SIZES | {"vocab_size": vocab})
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(source)
    out = tmp_path / "out"
    result = cli(*train_args(source, out, "--steps", 2))
    if vocab >= 256:
        assert result.returncode == 0, result.stderr
        assert "training on bytes" in result.stdout
        assert transformers.AutoModelForCausalLM.from_pretrained(out).config.vocab_size == vocab
    else:
        assert result.returncode == 2 and "cannot take bytes" in result.stderr
        assert not out.exists()


@pytest.mark.slow
def test_a_model_past_two_gigabytes_trains_and_comes_back(tmp_path):
    """By hand (``pytest -m slow -k two_gigabytes``; 93 s and 12.5 GB here): a 597M-parameter
    Qwen2 (2.39 GB of float32 weights, past protobuf's 2 GB) trains a step through the CLI, and
    the directory it writes loads. docs/PERFORMANCE.md has the figures."""
    import resource

    source, out = tmp_path / "model", tmp_path / "out"
    config = transformers.Qwen2Config(
        hidden_size=2048, intermediate_size=5504, num_hidden_layers=12, num_attention_heads=16,
        num_key_value_heads=4, head_dim=128, vocab_size=32000, max_position_embeddings=64,
        tie_word_embeddings=True, use_cache=False,
    )  # fmt: skip
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(source)
    assert (source / "model.safetensors").stat().st_size > 2**31
    result = cli(source, "--data", *DATA, "--steps", 1, "--batch", 1, "--seq", 16, "--out", out)
    assert result.returncode == 0, result.stderr[-3000:]
    print(
        result.stdout,
        f"child peak RSS {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20:.1f} GB",
    )
    model, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info


def test_out_is_never_the_input_directory(directory, tmp_path, command):
    import shutil

    source = tmp_path / "model"
    shutil.copytree(directory, source)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in source.iterdir())
    code, err = command("train", *train_args(source, source, "--steps", 1))
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert f"--out {source} holds the input model" in err
    assert sorted((p.name, p.stat().st_mtime_ns) for p in source.iterdir()) == before


def test_an_export_never_resumes_a_directorys_run_nor_the_reverse(directory, trained, tmp_path, command):
    from ort_ascend_ops.examples import byte_llama

    out, _ = trained
    before = sorted((p.name, p.stat().st_mtime_ns) for p in out.iterdir())
    code, err = command("train", byte_llama.model_path(), "--out", out, "--resume", "--batch", 2, "--seq", 32)
    assert code == 2 and "holds the run of another model" in err, err[-2000:]
    assert "Hugging Face directory" in err and "ONNX export" in err
    assert sorted((p.name, p.stat().st_mtime_ns) for p in out.iterdir()) == before
    onnx_run = tmp_path / "onnx-run"
    assert (
        command("train", byte_llama.model_path(), "--out", onnx_run, "--steps", 1, "--batch", 2, "--seq", 32)[
            0
        ]
        == 0
    )
    code, err = command("train", *train_args(directory, onnx_run, "--resume"))
    assert code == 2 and "holds the run of another model" in err, err[-2000:]


def test_an_encoder_is_refused_as_it_is_no_causal_lm(tmp_path, command):
    """BERT with a decoder head (``BertLMHeadModel``) but no ``is_decoder``: its attention sees the
    whole sequence, so the causal-LM loss would train it to read the next token."""
    source = tmp_path / "bert"
    config = transformers.BertConfig(
        vocab_size=300, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=48
    )
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(source)
    code, err = command("train", *train_args(source, tmp_path / "out", "--steps", 1))
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert "is not a causal language model" in err and str(source) in err
    assert not (tmp_path / "out").exists()
    decoder = tmp_path / "bert-decoder"  # is_decoder: causal attention, trained
    config.is_decoder = True
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(decoder)
    assert command("train", *train_args(decoder, tmp_path / "out2", "--steps", 1))[0] == 0


_PEAK = """
import resource, subprocess, sys
result = subprocess.run([sys.executable, "-m", "ort_ascend_ops", "train", *sys.argv[1:]], capture_output=True, text=True)
sys.stderr.write(result.stderr)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
sys.exit(result.returncode)
"""


def test_a_vocab_size_typo_is_refused_before_the_embedding_is_allocated(directory, tmp_path):
    """50M tokens for 320: the config's embedding alone would be 6.4 GB of float32; refused from
    the weights' shapes with the peak of the process far below that."""
    import shutil

    broken = tmp_path / "typo"
    shutil.copytree(directory, broken)
    config = json.loads((broken / "config.json").read_text()) | {"vocab_size": 50_000_000}
    (broken / "config.json").write_text(json.dumps(config))
    result = subprocess.run(
        [sys.executable, "-c", _PEAK, *map(str, train_args(broken, tmp_path / "out"))],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "model.embed_tokens.weight" in result.stderr and "do not match config.json" in result.stderr
    assert int(result.stdout) < 1.5 * 2**30, f"peak {int(result.stdout) / 2**30:.1f} GB"
    assert not (tmp_path / "out").exists()


def test_a_sequence_past_the_models_positions_is_refused(directory, tmp_path, command):
    positions = json.loads((directory / "config.json").read_text())["max_position_embeddings"]
    code, err = command("train", *train_args(directory, tmp_path / "out", "--seq", positions + 1))
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert f"--seq {positions + 1} is past them" in err
    assert not (tmp_path / "out").exists()


def test_recompute_and_the_loss_in_chunks_train_a_directory_as_without(directory, trained, tmp_path):
    """The run of ``trained`` again with --recompute selective and the loss in chunks of 50 of
    its 128 tokens: the same losses but for the order of the loss's sums."""
    import csv

    out = tmp_path / "run"
    result = cli(*train_args(directory, out, "--recompute", "selective", "--loss-chunk-size", 50))
    assert result.returncode == 0, result.stderr[-3000:]

    def losses(run):
        with open(run / "losses.csv", newline="") as f:
            return np.float64([row["loss"] for row in csv.DictReader(f)])

    # Other tests of this module go on with the run of ``trained``: its first STEPS rows.
    assert np.allclose(losses(out), losses(trained[0])[:STEPS], rtol=1e-5, atol=0)
