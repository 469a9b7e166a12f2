"""``python -m ort_ascend_ops train`` on the demo's byte-level Llama: the losses equal PyTorch
training the same Hugging Face model on the same batches, Ctrl-C saves and a resumed run gives
the uninterrupted run's losses bit for bit, and the run leaves its CSV, PNG and checkpoint."""

import csv
import importlib.util
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from model_oracles import relative_error

from ort_ascend_ops.examples import byte_llama
from ort_ascend_ops.trainer import Corpus
from ort_ascend_ops.training.api import CheckpointState, LinearLRScheduler, Module, Optimizer
from ort_ascend_ops.training.artifacts import generate_artifacts
from ort_ascend_ops.training.optim import AdamW

STEPS = 20
LOSS_TOLERANCE = 1e-4
# Small enough for CI: the run's settings, as command-line options.
RUN = [
    "--steps",
    "8",
    "--batch",
    "2",
    "--seq",
    "32",
    "--lr",
    "3e-3",
    "--save-every",
    "2",
    "--eval-every",
    "4",
]


@pytest.fixture(scope="module")
def corpus():
    return Corpus.python_stdlib()


def test_training_equals_pytorch_on_the_same_batches(corpus, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    lr, warmup, batch, seq = 3e-3, 4, 4, 64
    paths = generate_artifacts(byte_llama.model_path(), optimizer=AdamW(lr=lr), artifact_directory=tmp_path)
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state, threads=1)
    optimizer = Optimizer(paths["optimizer"], module)
    scheduler = LinearLRScheduler(optimizer, warmup, STEPS, lr)

    torch.set_num_threads(1)
    reference = byte_llama.module()
    reference.load_state_dict({n: torch.from_numpy(p.data) for n, p in state.parameters.items()})
    reference.train()
    reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        reference_optimizer, lambda s: s / warmup if s < warmup else max(0.0, (STEPS - s) / (STEPS - warmup))
    )
    ours, theirs = [], []
    for step in range(1, STEPS + 1):
        window = corpus.batch("train", step, batch, seq)
        ours.append(float(module(window, window)))
        optimizer.step()
        scheduler.step()
        module.lazy_reset_grad()
        ids = torch.from_numpy(window)
        loss = reference(input_ids=ids, labels=ids).loss
        reference_optimizer.zero_grad()
        loss.backward()
        reference_optimizer.step()
        schedule.step()
        theirs.append(float(loss.detach()))
    assert ours[-1] < ours[0] - 0.5, "the loss barely fell: the comparison would prove little"
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, theirs, strict=True))
    assert worst <= LOSS_TOLERANCE, (ours, theirs)
    for name, parameter in reference.named_parameters():
        assert relative_error(state.parameters[name].data, parameter.detach().numpy()) <= 1e-3, name


def _train(out: Path, *extra: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "ort_ascend_ops", "train", str(byte_llama.model_path()), *RUN]
    command += ["--out", str(out), "--threads", "1", *extra]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _rows(out: Path) -> list[dict]:
    with open(out / "losses.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_ctrl_c_saves_and_resume_is_bit_identical(tmp_path):
    straight = _train(tmp_path / "straight")
    log, _ = straight.communicate(timeout=600)
    assert straight.returncode == 0, log
    assert (tmp_path / "straight" / "checkpoint.safetensors").exists()
    assert (tmp_path / "straight" / "loss_curve.png").exists() or "matplotlib is not installed" in log

    interrupted = _train(tmp_path / "resumed")
    for line in interrupted.stdout:
        if "    3/8" in line:
            interrupted.send_signal(signal.SIGINT)
            break
    rest, _ = interrupted.communicate(timeout=600)
    assert interrupted.returncode == 128 + signal.SIGINT, rest  # as a shell reports the signal
    assert "stopped by SIGINT: saved the checkpoint of step" in rest
    stopped_at = len(_rows(tmp_path / "resumed"))
    assert 3 <= stopped_at < 8
    resumed = _train(tmp_path / "resumed", "--resume")
    log, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, log
    assert "(resumed)" in log
    # Every column but the step's seconds, as written (repr of the float): bit for bit.
    keep = ("step", "loss", "eval_loss", "learning_rate")
    expected = [{k: r[k] for k in keep} for r in _rows(tmp_path / "straight")]
    assert [{k: r[k] for k in keep} for r in _rows(tmp_path / "resumed")] == expected
    final = {
        n: p.data
        for n, p in CheckpointState.load_checkpoint(
            tmp_path / "straight" / "checkpoint.safetensors"
        ).parameters
    }
    again = CheckpointState.load_checkpoint(tmp_path / "resumed" / "checkpoint.safetensors")
    for name, parameter in again.parameters:
        np.testing.assert_array_equal(parameter.data, final[name])


def test_train_reports_bad_data_paths(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ort_ascend_ops",
            "train",
            str(byte_llama.model_path()),
            "--data",
            str(tmp_path / "none"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert f"{tmp_path / 'none'}: no such file or directory" in result.stderr


def test_the_committed_model_is_what_its_script_exports(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    script = Path(__file__).parents[1] / "models" / "byte_llama.py"
    spec = importlib.util.spec_from_file_location("models_byte_llama", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    assert (tmp_path / byte_llama.FILE).read_bytes() == (script.parent / byte_llama.FILE).read_bytes()


def test_training_is_bit_identical_run_to_run_and_across_thread_counts(corpus, tmp_path):
    """The demo's shape gives the same bits at 1, 2 and 3 threads. (At some small shapes, batch 2 x
    seq 32 for one, ONNX Runtime's own standard kernels give gradients an ulp apart between thread
    counts; run to run at one thread count they stay identical, which is what resuming needs.)"""
    paths = generate_artifacts(byte_llama.model_path(), optimizer=AdamW(lr=3e-3), artifact_directory=tmp_path)

    def run(threads, batch, seq):
        state = CheckpointState.load_checkpoint(paths["checkpoint"])
        module = Module(paths["training"], state, threads=threads)
        optimizer = Optimizer(paths["optimizer"], module)
        losses = []
        for step in range(2):
            window = corpus.batch("train", step, batch, seq)
            losses.append(module(window, window).tobytes())
            optimizer.step()
            module.lazy_reset_grad()
        return losses, {n: p.data.tobytes() for n, p in state.parameters}

    demo_shape = byte_llama.BATCH, byte_llama.SEQUENCE
    first = run(1, *demo_shape)
    assert run(2, *demo_shape) == first and run(3, *demo_shape) == first
    assert run(2, 2, 32) == run(2, 2, 32)


def test_precision_and_clipping_are_recorded_and_a_resume_must_match(tmp_path):
    out = tmp_path / "fp16"
    run = _train(out, "--precision", "fp16-mixed", "--max-grad-norm", "0.5")
    log, _ = run.communicate(timeout=600)
    assert run.returncode == 0, log
    assert "fp16-mixed (loss scale 65536)" in log and "clipped to norm 0.5" in log
    assert "scale 65536  skipped 0" in log  # the progress line
    rows = _rows(out)
    assert {r["loss_scale"] for r in rows} == {"65536.0"} and {r["skipped"] for r in rows} == {"0"}
    assert all(float(r["grad_norm"]) > 0 for r in rows)
    state = CheckpointState.load_checkpoint(out / "checkpoint.safetensors")
    assert state.properties["precision"] == "fp16-mixed" and state.properties["max_grad_norm"] == 0.5
    scaler = state.loss_scaler.state_dict()
    assert (scaler["scale"], scaler["_growth_tracker"]) == (65536.0, 8)

    other = _train(out, "--resume", "--precision", "bf16-mixed", "--max-grad-norm", "0.5")
    log, _ = other.communicate(timeout=600)
    assert other.returncode == 2
    assert "--precision bf16-mixed cannot resume" in log and "--precision fp16-mixed" in log
    for bad, message in (
        ("--precision=fp8", "--precision: invalid choice: 'fp8'"),
        ("--max-grad-norm=-1", ">= 0"),
    ):
        wrong = _train(tmp_path / "bad", bad)
        log, _ = wrong.communicate(timeout=600)
        assert wrong.returncode == 2 and message in log, log
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("precision", ["bf16-mixed", "fp16-mixed"])
def test_mixed_precision_is_bit_identical_across_thread_counts(precision, corpus, tmp_path):
    """As in float32 (ONNX Runtime's float16 MatMul alone would give gradients an ulp apart at 1
    and 2 threads: runtime.widen_float16_products)."""
    paths = generate_artifacts(
        byte_llama.model_path(), optimizer=AdamW(lr=3e-3), artifact_directory=tmp_path, precision=precision
    )

    def run(threads):
        state = CheckpointState.load_checkpoint(paths["checkpoint"])
        module = Module(paths["training"], state, threads=threads)
        optimizer = Optimizer(paths["optimizer"], module)
        losses = []
        for step in range(2):
            window = corpus.batch("train", step, byte_llama.BATCH, byte_llama.SEQUENCE)
            losses.append(module(window, window).tobytes())
            optimizer.step()
            module.lazy_reset_grad()
        return losses, {n: p.data.tobytes() for n, p in state.parameters}

    first = run(1)
    assert run(2) == first and run(4) == first
