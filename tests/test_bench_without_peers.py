"""``bench`` where the optional peers and packages cannot be imported (``pip install '.[cpu]'``
alone): ours still run and are timed, and each absent one is one line naming it, what the run
leaves out and the pip command. Nothing is uninstalled: a ``sitecustomize`` on PYTHONPATH makes
them unimportable in every process of the run, the command's re-execution of itself (see
``_bench``) and the children of training_step included."""

import json
import os
import subprocess
import sys

import pytest

BLOCKED = ["torch", "transformers", "onnxruntime.training", "matplotlib", "threadpoolctl"]


@pytest.fixture
def without_peers(tmp_path):
    """The environment of a child process in which BLOCKED do not import, and no onnxruntime-training
    venv is set."""
    folder = tmp_path / "blocker"
    folder.mkdir()
    # A None in sys.modules makes an import raise ModuleNotFoundError, as for a package that is not
    # installed; site imports sitecustomize at every start, from PYTHONPATH first.
    (folder / "sitecustomize.py").write_text(f"import sys\nsys.modules.update(dict.fromkeys({BLOCKED!r}))\n")
    env = {k: v for k, v in os.environ.items() if k != "ORT_ASCEND_OPS_ORTTRAINING_VENV"}
    return env | {"PYTHONPATH": os.pathsep.join([str(folder), *filter(None, [env.get("PYTHONPATH")])])}


def _absent_lines(text: str) -> dict[str, list[str]]:
    """The lines saying a peer or package is absent, by the name they start with."""
    lines: dict[str, list[str]] = {}
    for line in text.splitlines():
        if " absent (" in line:
            lines.setdefault(line.split(" absent (")[0], []).append(line)
    return lines


def test_the_op_benchmarks_run_ours_and_say_once_what_is_absent(tmp_path, without_peers):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    argv = ["flash_attention_score_grad", "rms_norm", "--quick", "--threads", "1", "--dtypes", "float32"]
    done = subprocess.run(
        [sys.executable, "-m", "ort_ascend_ops", "bench", *argv, "--json", str(out), "--png", str(png)],
        capture_output=True,
        text=True,
        env=without_peers,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    rows = [line.split("  ")[0] for line in done.stdout.splitlines()]
    assert "FlashAttentionGrad S=256 D=64 causal float32" in rows and "RmsNorm 64x4096 float32" in rows
    lines = _absent_lines(done.stdout + done.stderr)
    assert set(lines) == {"PyTorch", "threadpoolctl", "matplotlib"}, lines
    assert all(len(said) == 1 for said in lines.values()), lines
    (torch,), (threadpoolctl,), (matplotlib,) = lines["PyTorch"], lines["threadpoolctl"], lines["matplotlib"]
    assert "(vs PyTorch) stays empty" in torch and "install: pip install torch==2.13.0" in torch
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in torch
    assert "install: pip install 'ort_ascend_ops[bench]'" in threadpoolctl
    assert (
        f"no chart written to {png}" in matplotlib
        and "install: pip install 'ort_ascend_ops[bench]'" in matplotlib
    )
    assert not png.exists()
    report = json.loads(out.read_text())
    assert report["absent_peers"] == {
        "PyTorch": torch,
        "threadpoolctl": threadpoolctl,
        "matplotlib": matplotlib,
    }
    assert {r["case"] for r in report["results"]} == {
        "FlashAttentionGrad S=256 D=64 causal float32",
        "RmsNorm 64x4096 float32",
    }
    for r in report["results"]:
        assert r["native_s"] > 0 and r["absent"]["torch"] == "not installed"


# Each call's exit status, printed by the child as its last line: the bench's own come before.
CHILD = """
import json, sys
from ort_ascend_ops.bench import training_step
configs = training_step._configs
# The byte Llama's committed export, on a smaller batch: as meaningful, a fraction of the time.
training_step._configs = lambda: {n: c | {"batch": 2, "seq": 32} for n, c in configs().items()}
from ort_ascend_ops.__main__ import main
print(json.dumps([main(argv) for argv in json.loads(sys.argv[1])]))
"""


def test_training_step_runs_ours_on_the_committed_export_and_refuses_what_needs_torch(
    tmp_path, without_peers
):
    out = tmp_path / "training_step.json"
    calls = [
        ["bench", "training_step", "--quick", "--nproc", "1"],  # torchrun: nothing can run
        ["bench", "training_step", "llama512", "--quick"],  # a transformers model: nothing either
        ["bench", "training_step", "--quick", "--threads", "1", "--json", str(out)],
    ]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(calls)], capture_output=True, text=True, env=without_peers
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [2, 2, 0], done.stderr
    refused = _absent_lines(done.stderr)
    assert set(refused) == {"PyTorch", "transformers"}, refused
    for said in refused.values():  # one line for --nproc, one for llama512
        nproc, llama = said
        assert "--nproc needs torch.distributed (torchrun)" in nproc and "nothing ran" in nproc
        assert "llama512 skipped (transformers models exported by torch)" in llama
    assert "training_step: none of ['llama512'] can run" in done.stderr

    lines = _absent_lines(done.stdout)
    assert set(lines) == {"PyTorch", "transformers", "onnxruntime-training"}, lines
    assert all(len(said) == 1 for said in lines.values()), lines
    (torch,), (transformers,), (orttraining,) = lines.values()
    for line in (torch, transformers):
        assert "no PyTorch or onnxruntime-training rows; byte_llama from the committed export" in line
        assert "llama512, llama768, mixtral256 skipped" in line
    assert "install: pip install torch==2.13.0" in torch
    assert "install: pip install 'ort_ascend_ops[torch]'" in transformers
    assert "(no venv given: --peer-venv or $ORT_ASCEND_OPS_ORTTRAINING_VENV)" in orttraining
    assert (
        "pip install onnxruntime-training==1.19.2" in orttraining and "--peer-venv /tmp/ortt" in orttraining
    )
    assert "## byte_llama" in done.stdout and "## llama512" not in done.stdout
    (result,) = json.loads(out.read_text())["results"]
    assert {r["engine"] for r in result["runs"]} == {"ours native", "ours portable"}
    assert all(r["median_s"] > 0 and r["first_loss"] > 0 for r in result["runs"])
    (memory,) = result["memory"].values()
    assert set(memory) == {"ours native", "ours portable"}
    assert all(m["peak_rss"] > 0 for m in memory.values()), memory
