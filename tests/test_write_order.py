"""The norm kernels write their output rows one at a time, whatever page offsets the buffers have
(tests/native/write_order.cc watches the first write to each output page). Two rows written in
turn, at widths that put every row at the same page offset, made bfloat16 RmsNormGrad 1.4-2.2x
slower; this checks the row order itself, without timing."""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ["rms_norm.cc", "rms_norm_grad.cc", "row.cc"]


def test_norm_kernels_write_rows_one_at_a_time(tmp_path):
    driver = tmp_path / "write_order"
    compiler = os.environ.get("CXX", "c++")
    sources = [ROOT / "tests/native/write_order.cc", *(ROOT / "native/kernels" / k for k in KERNELS)]
    subprocess.run(
        [compiler, "-O1", "-std=c++17", f"-I{ROOT / 'native'}", "-o", driver, *sources], check=True
    )
    run = subprocess.run([driver], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count(": RmsNorm ok, RmsNormGrad ok") == 60, run.stdout
