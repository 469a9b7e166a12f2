"""The command line's main job and benchmark run end to end (no timing is asserted)."""

import json
import subprocess
import sys

from ort_ascend_ops.__main__ import main


def test_demo_reports_agreement(tmp_path):
    # Run from elsewhere: `-m` from the checkout would import the source tree, which has no library.
    result = subprocess.run(
        [sys.executable, "-m", "ort_ascend_ops", "demo"], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict: native kernels and reference functions agree" in result.stdout


def test_quick_bench_writes_every_case(tmp_path, capsys):
    out = tmp_path / "bench.json"
    names = ["rms_norm", "rms_norm_grad", "lightning_indexer_grad"]
    assert main(["bench", *names, "--quick", "--threads", "1", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {r["case"].split()[0] for r in rows} == {"RmsNorm", "RmsNormGrad", "IndexerGrad"}
    assert {r["roof"] for r in rows} == {"copy", "sgemm"}
    assert all(r["native_s"] > 0 and r["roof_fraction"] > 0 and r["speedup_vs_reference"] > 0 for r in rows)
    assert "RmsNormGrad 512x1024 bfloat16" in capsys.readouterr().out


def test_unknown_bench_is_refused(capsys):
    assert main(["bench", "no_such_op"]) == 2
    assert "unknown benchmarks" in capsys.readouterr().err
