"""Scratch memory stays within SECURITY.md's bound on shapes where it used to grow with T1 x S2,
K x D or K x N1 (gigabytes for megabytes of tensors): the peak growth of resident memory during
one call, in a child process of its own (tests/scratch_check.py), which also checks the results
against the float64 oracle."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cases import CASES

MiB = 1 << 20
THREADS = 2

# SECURITY.md ("Concurrency and resources"): scratch is at most SCRATCH_PER_TENSOR_BYTE times the
# call's inputs and outputs, plus SCRATCH_FIXED, plus SCRATCH_PER_THREAD per intra-op thread.
SCRATCH_PER_TENSOR_BYTE = 4
SCRATCH_FIXED = 16 * MiB
SCRATCH_PER_THREAD = 4 * MiB
# The growth also holds the outputs (allocated during the call) and what ONNX Runtime allocates
# for its own use while running a node.
ORT_RUN = 8 * MiB


@pytest.mark.parametrize(
    "op, case", [(op, case) for op, cases in CASES.items() for case in cases.scratch], ids=lambda v: v
)
def test_scratch_is_bounded_by_the_tensors(op, case):
    script = Path(__file__).with_name("scratch_check.py")
    command = [sys.executable, str(script), op, case, str(THREADS)]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    measured = json.loads(result.stdout.splitlines()[-1])
    bound = (
        (1 + SCRATCH_PER_TENSOR_BYTE) * measured["tensors"]
        + SCRATCH_FIXED
        + THREADS * SCRATCH_PER_THREAD
        + ORT_RUN
    )
    assert measured["growth"] <= bound, (
        f"resident memory grew {measured['growth'] / MiB:.1f} MiB for {measured['tensors'] / MiB:.1f} MiB "
        f"of tensors (bound {bound / MiB:.1f} MiB)"
    )
