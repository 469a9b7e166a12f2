"""``python -m ort_ascend_ops train`` as a careless or hostile user meets it, each case in a child
process: every way a model path or an option can be wrong is exit code 2 naming it, before
anything is written; a run folder has an identity that ``--resume`` must match, a fresh run does
not overwrite one, and two runs cannot share one; SIGTERM saves as Ctrl-C does and the exit code
says the run was stopped; a kill at any moment leaves rows for every step the checkpoint holds;
a diverging run stops with exit code 1."""

import csv
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ort_ascend_ops.examples import byte_llama
from ort_ascend_ops.training.checkpoint import read_properties

MODEL = byte_llama.model_path()
RUN = ["--batch", "2", "--seq", "32", "--lr", "3e-3", "--threads", "1"]


def cli(*args, cwd=None, preexec_fn=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ort_ascend_ops", "train", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        preexec_fn=preexec_fn,
        timeout=900,  # a guard against a hang, not a speed limit
    )


def start(*args) -> subprocess.Popen:
    command = [sys.executable, "-m", "ort_ascend_ops", "train", *map(str, args)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(process: subprocess.Popen, text: str) -> list[str]:
    """The lines ``process`` printed up to the first holding ``text``."""
    lines = []
    for line in process.stdout:
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"the run ended before printing {text!r}: {''.join(lines)[-3000:]}")


def refused(result: subprocess.CompletedProcess, *words: str) -> None:
    """Exit code 2, each word in the message, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)


def refused_in_process(command, *args) -> str:
    """``train`` refused by the ``command`` fixture: exit code 2 and no traceback; its stderr."""
    code, err = command("train", *args)
    assert code == 2 and "Traceback" not in err, (code, err[-2000:])
    return err


def rows(out: Path) -> list[dict]:
    with open(out / "losses.csv", newline="") as f:
        return list(csv.DictReader(f))


def listing(folder: Path) -> list[tuple[str, int]]:
    return sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir())


def _scores_model() -> onnx.ModelProto:
    """An export whose one output is logits, not a loss."""
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["logits"])],
        "no-loss",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", "s", 4])],
        [numpy_helper.from_array(np.zeros((256, 4), np.float32), "table")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _float_input_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["loss"], keepdims=0)],
        "float-input",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s"])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _bad_model(folder: Path, how: str) -> tuple[Path, str]:
    """A model path wrong one way, and the words its refusal must carry."""
    path = folder / "model.onnx"
    if how == "a text file":
        path = folder / "notes.txt"
        path.write_text("meeting notes: train the model on Monday\n")
        return path, "not an ONNX model"
    if how == "a truncated export":
        path.write_bytes(MODEL.read_bytes()[: MODEL.stat().st_size // 2])
        return path, "not an ONNX model"
    if how == "an empty file":
        path.write_bytes(b"")
        return path, "an empty file"
    if how == "no scalar loss":
        onnx.save(_scores_model(), path)
        return path, "not a scalar"
    if how == "a float input":
        onnx.save(_float_input_model(), path)
        return path, "input 'x' is not a [batch, sequence] tensor of token ids"
    if how == "missing external data":
        onnx.save(
            onnx.load(MODEL), path, save_as_external_data=True, location="weights.bin", size_threshold=0
        )
        (folder / "weights.bin").unlink()
        return path, "weights.bin, which is missing"
    if how == "a directory without config.json":
        path = folder / "model-directory"
        path.mkdir()
        (path / "model.safetensors").write_bytes(b"")
        return path, "no config.json"
    if how == "no such path":
        return folder / "nowhere.onnx", "no such ONNX model or Hugging Face directory"
    raise AssertionError(how)


BAD_MODELS = [
    "a text file",
    "a truncated export",
    "an empty file",
    "no scalar loss",
    "a float input",
    "missing external data",
    "a directory without config.json",
    "no such path",
]


@pytest.mark.parametrize("how", BAD_MODELS)
def test_a_model_path_that_is_not_a_trainable_model_is_refused_naming_it(how, tmp_path, command):
    path, words = _bad_model(tmp_path, how)
    out = tmp_path / "out"
    err = refused_in_process(command, path, "--out", out, *RUN)
    assert str(path) in err and words in err, err
    assert not out.exists()


# The child refuses itself the model's file as the kernel refuses a file without read rights (which
# root, who runs CI, reads anyway): its audit hook fails the open with EACCES.
_UNREADABLE = """
import errno, os, sys
def deny(event, args):
    if event == "open" and os.fspath(args[0]) == sys.argv[1]:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), args[0])
sys.addaudithook(deny)
from ort_ascend_ops.__main__ import main
sys.exit(main(["train", *sys.argv[1:]]))
"""


def test_an_unreadable_model_is_refused_naming_it(tmp_path):
    path = tmp_path / "model.onnx"
    shutil.copyfile(MODEL, path)
    result = subprocess.run(
        [sys.executable, "-c", _UNREADABLE, str(path), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    refused(result, str(path), "cannot be read (Permission denied)")
    assert not (tmp_path / "out").exists()


BAD_OPTIONS = [
    (["--steps", "0"], "--steps must be at least 1, got 0"),
    (["--steps", "-5"], "--steps must be at least 1, got -5"),
    (["--batch", "0"], "--batch must be at least 1, got 0"),
    (["--seq", "1"], "--seq must be at least 2, got 1"),
    (["--lr", "-1"], "--lr must be a finite number >= 0, got -1.0"),
    (["--lr", "nan"], "--lr must be a finite number >= 0, got nan"),
    (["--steps", "10", "--warmup-steps", "11"], "--warmup-steps must be at most --steps (10), got 11"),
    (["--threads", "-1"], "--threads must be at least 0, got -1"),
    (["--threads", "abc"], "argument --threads: invalid int value: 'abc'"),
    (["--out", ""], "--out must be a folder's path, not empty"),
    (["--save-every", "-1"], "--save-every must be at least 0, got -1"),
    (["--eval-every", "-2"], "--eval-every must be at least 0, got -2"),
    (["--grad-accum", "0"], "--grad-accum must be at least 1, got 0"),
    (["--seed", "-1"], "--seed must be at least 0, got -1"),
    (["--weight-decay", "inf"], "--weight-decay must be a finite number >= 0, got inf"),
    (["--max-grad-norm", "-1"], "--max-grad-norm must be a finite number >= 0, got -1.0"),
    (["--lr-scheduler", "exponential"], "argument --lr-scheduler: invalid choice: 'exponential'"),
    (["--zero", "1"], "--zero 1 shards the optimizer states over torchrun's processes; this is one process"),
    (
        ["--resume", "--overwrite"],
        "--resume goes on with the run in --out and --overwrite replaces it: give one",
    ),
]


@pytest.mark.parametrize("bad, message", BAD_OPTIONS, ids=[" ".join(b) for b, _ in BAD_OPTIONS])
def test_every_option_is_checked_before_anything_is_written(bad, message, tmp_path, command, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a relative --out "" would write
    assert message in refused_in_process(command, MODEL, *RUN, "--out", tmp_path / "out", *bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "something was written"


def test_an_out_that_cannot_be_a_folder_is_refused_before_training(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    refused(cli(MODEL, *RUN, "--out", blocker), f"--out {blocker} is a file, not a folder")
    result = cli(MODEL, *RUN, "--out", blocker / "run")
    refused(result, f"--out {blocker / 'run'} cannot be written")
    assert "training" not in result.stdout  # refused before the first step, not after the last


def test_data_shorter_than_one_window_is_refused(tmp_path):
    text = tmp_path / "texts"  # 20 documents: one held out
    text.mkdir()
    for i in range(20):
        (text / f"{i:02d}.txt").write_text("".join(f"document {i}, line {j}\n" for j in range(100)))
    result = cli(MODEL, *RUN, "--data", text, "--seq", "100000", "--out", tmp_path / "out")
    refused(result, str(text), "fewer than one window (--seq 100000 + 1)")
    assert not (tmp_path / "out").exists()


def test_zero_save_and_eval_periods_mean_the_last_step_alone(tmp_path):
    out = tmp_path / "out"
    result = cli(MODEL, *RUN, "--steps", "3", "--save-every", "0", "--eval-every", "0", "--out", out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert [bool(r["eval_loss"]) for r in rows(out)] == [False, False, True]
    assert read_properties(out / "checkpoint.safetensors")["step"] == 3


def test_a_fixed_shape_export_at_another_shape_is_refused_naming_the_input(tmp_path):
    model = onnx.load(MODEL)
    for value in model.graph.input:
        for dim, size in zip(value.type.tensor_type.shape.dim, (2, 32), strict=True):
            dim.dim_value = size
    path = tmp_path / "fixed.onnx"
    onnx.save(model, path)
    result = cli(path, *RUN, "--batch", "4", "--out", tmp_path / "out")
    refused(result, "input 'input_ids' is fixed at [2, 32]", "--batch 4 --seq 32")
    assert not (tmp_path / "out").exists()


def test_a_fresh_run_never_replaces_a_run_and_overwrite_does(tmp_path):
    """The default --out (train-output in the working folder) included."""
    first = cli(MODEL, *RUN, "--steps", "2", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    out = tmp_path / "train-output"
    before = listing(out)
    again = cli(MODEL, *RUN, "--steps", "1", cwd=tmp_path)
    refused(again, "--out train-output holds a run", "2 steps saved", "--resume", "--overwrite")
    assert listing(out) == before
    replaced = cli(MODEL, *RUN, "--steps", "1", "--overwrite", cwd=tmp_path)
    assert replaced.returncode == 0, replaced.stderr[-3000:]
    assert [r["step"] for r in rows(out)] == ["1"]
    assert read_properties(out / "checkpoint.safetensors")["step"] == 1


def test_resume_goes_on_only_with_the_same_model(tmp_path):
    out = tmp_path / "out"
    assert cli(MODEL, *RUN, "--steps", "1", "--out", out).returncode == 0
    other = onnx.load(MODEL)
    other.doc_string = "another model"
    path = tmp_path / "other.onnx"
    onnx.save(other, path)
    before = listing(out)
    for extra in ([], ["--resume"]):
        refused(cli(path, *RUN, "--steps", "2", "--out", out, *extra), "holds the run of another model")
    assert listing(out) == before


def test_a_run_killed_before_its_first_save_resumes_in_its_own_precision_alone(tmp_path):
    """The artifacts of the bf16 run are there, its checkpoint not yet: an fp32 resume is refused
    (it would train the bf16 graph), one that leaves --precision out goes on in bf16."""
    out = tmp_path / "out"
    run = start(
        MODEL, *RUN, "--precision", "bf16-mixed", "--steps", "1000", "--warmup-steps", "0", "--save-every", "0",
        "--out", out,
    )  # fmt: skip
    wait_for(run, "training byte_llama.onnx")
    run.kill()
    run.communicate()
    assert not (out / "checkpoint.safetensors").exists()
    refused(
        cli(MODEL, *RUN, "--resume", "--precision", "fp32", "--out", out),
        "--precision fp32 cannot resume",
        "--precision bf16-mixed",
    )
    resumed = cli(MODEL, *RUN, "--resume", "--steps", "2", "--out", out)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "bf16-mixed" in resumed.stdout and "steps 1..2" in resumed.stdout


def test_two_runs_cannot_share_a_folder(tmp_path):
    out = tmp_path / "out"
    first = start(MODEL, *RUN, "--steps", "100000", "--warmup-steps", "0", "--save-every", "0", "--out", out)
    try:
        wait_for(first, "training byte_llama.onnx")
        for extra in (["--resume"], ["--overwrite"]):
            refused(
                cli(MODEL, *RUN, "--steps", "2", "--out", out, *extra),
                f"--out {out} is in use by another run",
            )
    finally:
        first.kill()
        first.communicate()


def test_sigterm_saves_and_the_exit_code_says_the_run_was_stopped(tmp_path):
    out = tmp_path / "out"
    run = start(MODEL, *RUN, "--steps", "100000", "--save-every", "0", "--eval-every", "0", "--out", out)
    wait_for(run, "training byte_llama.onnx")
    run.send_signal(signal.SIGTERM)
    log, _ = run.communicate(timeout=600)
    assert run.returncode == 128 + signal.SIGTERM, log[-3000:]
    assert "stopped by SIGTERM: saved the checkpoint of step" in log
    step = read_properties(out / "checkpoint.safetensors")["step"]
    assert step >= 1 and [int(r["step"]) for r in rows(out)] == list(range(1, step + 1))


def test_a_kill_at_any_moment_leaves_a_row_for_every_saved_step(tmp_path):
    """SIGKILL at random moments of a run saving every step, resumed each time: the rows are
    those of the run that never stopped, bit for bit (the CSV is written before the checkpoint)."""
    args = [*RUN, "--steps", "30", "--save-every", "1", "--eval-every", "10"]
    straight = cli(MODEL, *args, "--out", tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-3000:]
    out, rng = tmp_path / "killed", np.random.default_rng()
    for attempt in range(4):
        run = start(MODEL, *args, "--out", out, *(["--resume"] if attempt else []))
        wait_for(run, "training byte_llama.onnx")
        try:
            run.wait(timeout=float(rng.uniform(0.0, 0.5)))
        except subprocess.TimeoutExpired:
            run.kill()
        run.communicate()
    finished = cli(MODEL, *args, "--out", out, "--resume")
    assert finished.returncode == 0, finished.stderr[-3000:]
    keep = ("step", "loss", "eval_loss", "learning_rate")
    assert [{k: r[k] for k in keep} for r in rows(out)] == [
        {k: r[k] for k in keep} for r in rows(tmp_path / "straight")
    ]


def test_a_losses_csv_missing_a_column_is_refused_on_resume(tmp_path):
    out = tmp_path / "out"
    assert cli(MODEL, *RUN, "--steps", "2", "--out", out).returncode == 0
    lines = (out / "losses.csv").read_text().splitlines()
    (out / "losses.csv").write_text("\n".join(",".join(line.split(",")[:-1]) for line in lines) + "\n")
    before = listing(out)
    refused(
        cli(MODEL, *RUN, "--steps", "3", "--resume", "--out", out), f"{out / 'losses.csv'}: no column seconds"
    )
    assert listing(out) == before


def test_a_diverging_fp32_run_stops_with_exit_code_1_and_keeps_its_checkpoint(tmp_path):
    out = tmp_path / "out"
    result = cli(
        MODEL, *RUN, "--lr", "1e30", "--warmup-steps", "0", "--max-grad-norm", "0", "--steps", "20",
        "--save-every", "1", "--out", out,
    )  # fmt: skip
    assert result.returncode == 1, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr and "at step" in result.stderr and "is intact" in result.stderr
    assert "the loss is nan" in result.stderr or "the loss is inf" in result.stderr


def test_recompute_and_the_loss_in_chunks_train_as_without_and_a_resume_may_change_them(tmp_path):
    """--recompute changes no number; --loss-chunk-size only the order of the loss's sums (the
    committed export is dynamic: its shapes are fixed at --batch and --seq first); a resume may
    switch either, and builds its artifacts again."""
    plain, recomputing, chunked = (tmp_path / name for name in ("plain", "recomputing", "chunked"))
    for out, extra in (
        (plain, []),
        (recomputing, ["--recompute", "full"]),
        (chunked, ["--loss-chunk-size", "24"]),
    ):
        result = cli(MODEL, *RUN, "--steps", "3", "--out", out, *extra)
        assert result.returncode == 0, result.stderr[-3000:]
    losses = {out: [r["loss"] for r in rows(out)] for out in (plain, recomputing, chunked)}
    assert losses[recomputing] == losses[plain]
    assert np.allclose(np.float64(losses[chunked]), np.float64(losses[plain]), rtol=1e-5, atol=0)
    resumed = cli(MODEL, *RUN, "--steps", "4", "--out", plain, "--resume", "--recompute", "selective")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    training = onnx.load(plain / "artifacts" / "training_model.onnx", load_external_data=False)
    assert any(n.name.endswith("/recomputed") for n in training.graph.node)
