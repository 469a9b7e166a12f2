"""The command line's main job and benchmark run end to end (no timing is asserted)."""

import functools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ort_ascend_ops.__main__ import main
from ort_ascend_ops.bench import peers

ROOT = Path(__file__).resolve().parent.parent


# Slow (85 s): CI's main job runs the demo itself, the README's first command, and fails when its
# verdict does; this checks what the demo prints, by hand with `pytest -m slow`.
@pytest.mark.slow
def test_demo_trains_every_model_and_passes(tmp_path):
    # From the checkout's root, as the README types it (`-m` puts the current folder first on
    # sys.path; the source tree is under src/, so the installed package is still the one found).
    result = subprocess.run(
        # Fewer language-model steps than the main job's 300 (CI runs that one too): enough for the
        # losses to pass the demo's bar.
        [sys.executable, "-m", "ort_ascend_ops", "demo", "--lm-steps", "120", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("verdict: PASS"), out
    # Every model trained, the profiler's tables show our ops, the checks ran.
    assert "[1/4] Hugging Face Llama over bytes" in out and "[3/4] DeepSeek indexer loss" in out
    assert "[2/4] DeepSeek-V3.2 indexer warm-up" in out and "LightningIndexerGrad x2" in out
    # The Hugging Face directory trained, written back, reloaded by transformers, generating.
    assert "[4/4] Hugging Face directory" in out and "the reloaded model in PyTorch" in out
    assert "generated: " in out and (tmp_path / "hf-trained" / "model.safetensors").exists()
    for op in ["RmsNormGrad", "RotaryPositionEmbeddingGrad", "LightningIndexerGrad"]:
        assert f"* {op} " in out
    assert out.count("native vs portable path") == 3 and out.count("finite differences (central") == 1
    assert (tmp_path / "losses.csv").exists() and (tmp_path / "checkpoint.safetensors").exists()
    pytest.importorskip("matplotlib")
    assert (tmp_path / "loss_curve.png").read_bytes().startswith(b"\x89PNG")


def test_demo_fails_with_reasons_when_the_loss_cannot_fall(capsys, tmp_path):
    # No steps: nothing to compare the loss with, so "fell" cannot hold; the verdict names why.
    argv = ["demo", "--steps", "0", "--lm-steps", "0", "--warmup-steps", "0", "--out", str(tmp_path)]
    assert main(argv) == 1
    verdict = capsys.readouterr().out.strip().splitlines()[-1]
    assert verdict.startswith("verdict: FAIL: ") and "indexer_loss: the loss did not fall" in verdict
    assert "deepseek_v32: the KL loss did not fall" in verdict
    assert "byte_llama: trained no steps" in verdict and "hf_directory: trained no steps" in verdict


def test_quick_bench_writes_json_and_markdown(tmp_path, capsys):
    out, md = tmp_path / "bench.json", tmp_path / "bench.md"
    argv = ["bench", "rms_norm", "indexer_grad", "--quick", "--threads", "1", "--json", str(out)]
    assert main([*argv, "--markdown", str(md)]) == 0
    report = json.loads(out.read_text())
    assert report["command"].startswith("python -m ort_ascend_ops bench rms_norm") and report["wall_s"] > 0
    machine = report["machine"]
    assert machine["cpu"]["label"] and machine["cores"] >= 1 and machine["versions"]["onnxruntime"]
    rows = report["results"]
    assert {r["case"].split()[0] for r in rows} == {"RmsNorm", "IndexerGrad"}
    assert {(r["dtype"], r["threads"]) for r in rows} == {("float32", 1), ("bfloat16", 1)}
    # IndexerGrad's bfloat16 rows are held to the bfloat16 GEMM where PyTorch is there to time it.
    assert {r["roof"] for r in rows} == {
        "copy",
        "sgemm",
        "bf16 gemm" if peers.importable("torch") else "sgemm",
    }
    for r in rows:
        assert r["native_s"] > 0 and r["native_repeats"] >= 1 and r["roof_fraction"] > 0
        assert r["speedup_vs_reference"] > 0
        # Every baseline either has a time or says why not.
        for name in ("torch", "ort"):
            assert (r[f"speedup_vs_{name}"] is None) == (name in r["absent"])
    by_case = {r["case"]: r for r in rows}
    assert by_case["RmsNorm 64x4096 float32"]["speedup_vs_ort"] > 0  # ORT's RMSNormalization ran
    assert by_case["IndexerGrad S1=16 S2=512 N1=8 K=128 float32"]["absent"]["ort"] == "no standard op"
    assert "RmsNorm 64x4096 bfloat16" in capsys.readouterr().out
    text = md.read_text()
    assert "`python -m ort_ascend_ops bench rms_norm" in text and machine["cpu"]["label"] in text
    assert "### RmsNorm" in text and "### LightningIndexerGrad" in text
    assert "| RmsNorm 64x4096 float32 | 1 |" in text


def test_quick_bench_runs_without_torch(tmp_path, capsys, monkeypatch):
    from ort_ascend_ops.bench import peers

    monkeypatch.setattr(peers, "torch_module", lambda: None)
    out = tmp_path / "bench.json"
    argv = ["bench", "rms_norm", "--quick", "--threads", "1", "--dtypes", "float32", "--json", str(out)]
    assert main(argv) == 0
    assert "PyTorch absent (not installed" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert "PyTorch" in report["absent_peers"]
    assert all(r["absent"]["torch"] == "not installed" for r in report["results"])


def test_bench_npu_step_names_what_it_needs(capsys):
    """Without onnxruntime-cann's EP (this venv), with a row not in the matrix or an option it does
    not read: exit 2 and a line naming it, before any work (the CANN job runs it for real)."""
    from ort_ascend_ops import aclnn_emulator

    if not aclnn_emulator.through_cann_ep():
        assert main(["bench", "npu_step"]) == 2
        assert "npu_step: needs onnxruntime-cann's CANNExecutionProvider" in capsys.readouterr().err
    assert main(["bench", "npu_step", "--threads", "2"]) == 2
    assert "--threads does not apply to npu_step" in capsys.readouterr().err


def test_bench_data_parallel_on_npus_names_what_it_needs(capsys):
    """``training_step --nproc N --device npu`` without the CANN EP (this venv) exits 2 naming it;
    ``--device`` without ``--nproc`` is refused naming the option (docs/PERFORMANCE.md has the
    figures of a run on the emulator, which takes minutes)."""
    from ort_ascend_ops import aclnn_emulator

    if not aclnn_emulator.through_cann_ep():
        assert main(["bench", "training_step", "byte_llama", "--nproc", "2", "--device", "npu"]) == 2
        assert "--device npu needs onnxruntime-cann's CANNExecutionProvider" in capsys.readouterr().err
    assert main(["bench", "training_step", "--device", "npu"]) == 2
    assert "--device does not apply to training_step" in capsys.readouterr().err


def test_quick_bench_charts_the_roofline(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "bench.png"
    argv = ["bench", "rope", "--quick", "--threads", "1", "--dtypes", "float32", "--png", str(png)]
    assert main(argv) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in capsys.readouterr().out


def test_bench_peers_compute_what_the_ops_compute():
    """The peers are only a fair comparison if they compute the op: PyTorch's formulas and ONNX
    Runtime's standard ops against the native kernels, on small float32 inputs."""
    torch = pytest.importorskip("torch")
    from ort_ascend_ops import make_session
    from ort_ascend_ops.bench import lightning_indexer, lightning_indexer_grad, peers, rms_norm
    from ort_ascend_ops.bench import rotary_position_embedding as rope
    from ort_ascend_ops.op_model import make_op_model

    def native(op, inputs, **attrs):
        model = make_op_model(op, {k: (v.dtype, v.shape) for k, v in inputs.items()}, attrs)
        return make_session(model).run(inputs)

    def standard(op, inputs, **attrs):
        return make_session(peers.standard_model(op, inputs, **attrs), native=False).run(inputs)[0]

    def grads(fn, wrt, dy):
        wrt = [torch.from_numpy(a).requires_grad_() for a in wrt]
        return [g.numpy() for g in torch.autograd.grad(fn(*wrt), wrt, torch.from_numpy(dy))]

    rng = np.random.default_rng(0)
    x, dy = rng.standard_normal((2, 2, 6, 3, 16), np.float32)
    half_cos, half_sin = rng.standard_normal((2, 6, 8), np.float32)
    for mode in range(4):
        # Tables whose halves repeat, as RotaryEmbedding's half-width caches mean.
        cos, sin = (
            np.concatenate([t, t], -1) if mode != 1 else np.repeat(t, 2, -1) for t in (half_cos, half_sin)
        )
        cos, sin = cos[None, :, None], sin[None, :, None]
        (y,) = native("RotaryPositionEmbedding", {"x": x, "cos": cos, "sin": sin}, mode=mode)
        np.testing.assert_allclose(rope.torch_rope(*map(torch.from_numpy, (x, cos, sin)), mode), y, atol=1e-6)
        ours = native("RotaryPositionEmbeddingGrad", {"dy": dy, "cos": cos, "sin": sin, "x": x}, mode=mode)
        theirs = grads(functools.partial(rope.torch_rope, mode=mode), [x, cos, sin], dy)
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5)
        if mode in (0, 1):
            ids = np.broadcast_to(np.arange(6), (2, 6)).copy()
            inputs = {
                "X": x.reshape(2, 6, 48),
                "cos_cache": half_cos,
                "sin_cache": half_sin,
                "position_ids": ids,
            }
            y_standard = standard("RotaryEmbedding", inputs, num_heads=3, interleaved=mode)
            np.testing.assert_allclose(y_standard.reshape(y.shape), y, atol=1e-6)

    x, dy = rng.standard_normal((2, 5, 32), np.float32)
    gamma = rng.standard_normal(32, np.float32)
    y, rstd = native("RmsNorm", {"x": x, "gamma": gamma}, epsilon=rms_norm.EPSILON)
    np.testing.assert_allclose(rms_norm.torch_rms_norm(*map(torch.from_numpy, (x, gamma))), y, atol=1e-6)
    y_standard = standard("RMSNormalization", {"x": x, "gamma": gamma}, axis=-1, epsilon=rms_norm.EPSILON)
    np.testing.assert_allclose(y_standard, y, atol=1e-6)
    ours = native("RmsNormGrad", {"dy": dy, "x": x, "rstd": rstd, "gamma": gamma})
    for a, b in zip(ours, grads(rms_norm.torch_rms_norm, [x, gamma], dy), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)

    inputs = lightning_indexer_grad.inputs_for(4, 64, 4, 16, 8, "float32")
    qkw = {name: inputs[name] for name in ("query", "key", "weights")}
    _, values = native("LightningIndexer", qkw, sparse_mode=0, sparse_count=8)
    top = lightning_indexer.torch_indexer(*map(torch.from_numpy, qkw.values()), 8)
    np.testing.assert_allclose(top.values, values, atol=1e-6)  # float32 sums in different orders
    ours = native("LightningIndexerGrad", inputs, head_num=4, sparse_mode=0)
    indices = torch.from_numpy(inputs["sparse_indices"].astype(np.int64))
    scores = functools.partial(lightning_indexer_grad.torch_selected_scores, indices=indices)
    for a, b in zip(ours, grads(scores, list(qkw.values()), inputs["dy"]), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_unknown_bench_is_refused(capsys):
    assert main(["bench", "no_such_op"]) == 2
    err = capsys.readouterr().err
    assert "unknown benchmarks ['no_such_op']" in err and "'cliffs'" in err
    for bad in (["--dtypes", "float8"], ["--threads", "0"]):
        with pytest.raises(SystemExit) as exit:
            main(["bench", "rms_norm", *bad])
        assert exit.value.code == 2
