"""Data parallel on NPUs, run by the CANN job (.ci/cann-ep): ``torchrun --nproc_per_node 2 ...
--device npu`` on the emulated CANN runtime with two emulated devices, each rank on
npu:LOCAL_RANK, the gradients all-reduced through HCCL device to device. Checked against one
process on one NPU with twice the batch on the same data (per-step losses and gradient norms,
final parameters and AdamW states), and the emulator's counters in rank 0's report: the
gradients' bytes went through HCCL, and the bus carried the batch and scalars alone."""

import os
import re

import pytest

from ort_ascend_ops import aclnn_emulator
from ort_ascend_ops.training.api import data_parallel

pytest.importorskip("torch")
import data_parallel_checks as checks  # noqa: E402

needs_cann_ep = pytest.mark.skipif(
    not aclnn_emulator.through_cann_ep(), reason="needs onnxruntime-cann (.ci/cann-ep)"
)
# checks.RUN's window (32): at 16 tokens, fp16-mixed's first step overflows in one process of 4 rows
# and not in two of 2 (a float16 weight gradient sums twice the rows), on the CPU's gloo alike.
NPU = ["--device", "npu"]
CASES = {
    "fp32": ("fp32", []),
    "fp16-mixed-accum2": ("fp16-mixed", ["--precision", "fp16-mixed", "--grad-accum", "2"]),
    "fp32-zero1": ("fp32", ["--zero", "1"]),
    "bf16-mixed-zero1": ("bf16-mixed", ["--precision", "bf16-mixed", "--zero", "1"]),
}


def _environment(devices: int, tmp_path=None) -> dict:
    audit = checks.audited_env(tmp_path / "out", tmp_path / "writes") if tmp_path else dict(os.environ)
    return audit | {"ACLEMU_DEVICE_COUNT": str(devices)}


@needs_cann_ep
@pytest.mark.parametrize("case", CASES)
def test_two_npus_equal_one_with_twice_the_batch_cann_ep(case, tmp_path):
    precision, extra = CASES[case]
    options = [*checks.RUN, *NPU, "--steps", "4", *extra]
    # One process holds every state: ZeRO is for many.
    single = [o for i, o in enumerate(options) if "--zero" not in options[max(i - 1, 0) : i + 1]]
    reference = checks.single(tmp_path / "one", [*single, "--batch", "4"], env=_environment(1))
    out, log = tmp_path / "two", tmp_path / "writes"
    env = checks.audited_env(out, log) | {"ACLEMU_DEVICE_COUNT": "2"}
    result = checks.torchrun(*options, "--batch", "2", "--out", str(out), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    checks.assert_same_run(out, reference, precision)
    text = result.stdout
    assert "rank r on npu:LOCAL_RANK, gradients through HCCL" in text, text[-3000:]
    call = "HcclReduceScatter" if "--zero" in extra else "HcclAllReduce"
    hccl = re.search(rf"HCCL in step 2: .*{call} x(\d+) \(([\d,]+) bytes\)", text)
    assert hccl, text[-3000:]
    parameters = int(re.search(r"training \S+: ([\d,]+) parameters", text)[1].replace(",", ""))
    flag = 4 if precision == "fp16-mixed" else 0  # the overflow flag, reduced beside them
    # float32 gradients of the float32 master parameters, in every precision
    sent = int(hccl[2].replace(",", ""))
    if call == "HcclAllReduce":
        assert sent == 4 * parameters + flag, hccl[0]
    else:  # the whole buffer, each rank's slot as long as the longest: the runs' imbalance on top
        assert 4 * parameters <= sent <= 1.25 * 4 * parameters and "HcclAllGather x1" in text, hccl[0]
    bus = re.search(r"bus in step 2: ([\d,]+) bytes to the NPU, ([\d,]+) back", text)
    batch = 2 * 2 * 32 * 8  # this rank's input ids and labels, int64
    assert sum(int(b.replace(",", "")) for b in bus.groups()) <= 2 * batch + 4096, bus[0]


def _ranks_device(device: str, local_rank: int):
    """``train``'s device check as rank ``local_rank`` of two on this machine runs it."""
    import types

    from ort_ascend_ops.trainer.loop import _check_device
    from ort_ascend_ops.trainer.settings import Settings

    parallel = types.SimpleNamespace(launch=data_parallel.Launch(local_rank=local_rank, world_size=2))
    _check_device(Settings(model=checks.MODEL, device=device), parallel)  # type: ignore[arg-type]


def test_a_rank_device_other_than_npu_is_refused_under_torchrun():
    from ort_ascend_ops.trainer.settings import SettingsError

    with pytest.raises(SettingsError, match="--device npu:0 under torchrun would put every rank on one NPU"):
        _ranks_device("npu:0", 1)


@needs_cann_ep
def test_a_rank_whose_npu_is_not_there_is_refused_naming_it_cann_ep(monkeypatch):
    """With one device emulated, rank 1's npu:1 is not there: an error naming it before any work."""
    from ort_ascend_ops.trainer.settings import SettingsError

    monkeypatch.setenv("ACLEMU_DEVICE_COUNT", "1")
    with pytest.raises(SettingsError, match="npu:1"):
        _ranks_device("npu", 1)


@needs_cann_ep
def test_each_bucket_is_all_reduced_as_the_backward_makes_it_and_sums_as_between_runs_cann_ep(tmp_path):
    """``hccl_overlap_ranks.py``: the gradients all-reduced in the graph equal, bit for bit, the
    local ones all-reduced after the run; ONNX Runtime runs the buckets' all-reduce nodes in
    order, the first once a little over the forward has run, spread through the backward."""
    import json
    import subprocess

    script = str(checks.TESTS / "hccl_overlap_ranks.py")
    command = [*checks.TORCHRUN, "--nproc_per_node", "2", script, str(tmp_path), checks.MODEL]
    result = subprocess.run(command, capture_output=True, text=True, env=_environment(2))
    assert result.returncode == 0, result.stderr[-3000:]
    run = json.loads(result.stdout.strip().splitlines()[-1])
    launches, nodes = run["buckets"], run["nodes"]
    assert len(launches) >= 5 and launches == sorted(launches), run
    assert launches[0] < 0.5 * nodes and launches[len(launches) // 2] < 0.75 * nodes, run


SHORT = [*checks.RUN, *NPU, "--save-every", "5", "--eval-every", "100", "--batch", "2"]


@needs_cann_ep
def test_a_killed_rank_makes_the_survivor_fail_naming_it_cann_ep(tmp_path):
    """Rank 1 killed mid-run: rank 0's HCCL all-reduce fails (the emulator sees its peer gone, as
    HCCL's link does, or its execution timeout ends), and the roll call names the lost rank."""
    import time

    out = tmp_path / "out"
    args = [*SHORT, "--steps", "100000", "--out", str(out), "--collective-timeout", "30"]
    env = _environment(2, tmp_path)
    survivor, victim = checks.ranks_without_agent(lambda rank: args, lambda rank: env)
    checks.wait_for_step(out / "checkpoint.safetensors", 5, survivor)
    victim.kill()
    start = time.monotonic()
    _, stderr = survivor.communicate(timeout=300)  # a guard against a hang, not a speed limit
    waited = time.monotonic() - start
    victim.communicate()
    assert survivor.returncode == 1, stderr[-3000:]
    assert "rank 1 of 2 is lost" in stderr and "HcclAllReduce" in stderr, stderr[-3000:]
    assert waited < 30 + data_parallel.ROLL_CALL_SECONDS + 30, waited


@needs_cann_ep
def test_a_killed_rank_is_restarted_by_torchrun_and_ends_as_an_uninterrupted_run_cann_ep(tmp_path):
    import signal
    import subprocess

    import numpy as np

    from ort_ascend_ops.training.checkpoint import read

    args = [*SHORT, "--steps", "12"]
    clean = tmp_path / "clean"
    result = checks.torchrun(*args, "--out", str(clean), env=_environment(2, tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "restarted"
    command = [*checks.TORCHRUN, "--nproc_per_node", "2", "--max-restarts", "1"]
    process = subprocess.Popen(
        [*command, checks.AUDIT, "train", checks.MODEL, *args, "--out", str(out)],
        env=_environment(2, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    checks.wait_for_step(out / "checkpoint.safetensors", 5, process)
    victims = checks.workers(process.pid, 1)
    assert victims, "rank 1's process not found"
    os.kill(victims[0], signal.SIGKILL)
    stdout, stderr = process.communicate(timeout=600)  # a guard against a hang, not a speed limit
    assert process.returncode == 0, stderr[-3000:]
    assert "torchrun restarted the processes (restart 1)" in stdout, stdout[-3000:]
    a, b = read(out / "checkpoint.safetensors"), read(clean / "checkpoint.safetensors")
    for name in b.parameters:  # the same ranks, the same sums: bit for bit
        assert np.array_equal(a.parameters[name], b.parameters[name]), name
    assert checks.losses(out) == checks.losses(clean)


@needs_cann_ep
def test_a_zero1_checkpoint_resumes_on_another_number_of_npus_cann_ep(tmp_path):
    """ZeRO-1's states gathered to rank 0 for the save (HCCL's broadcast from each owner) and
    scattered from it on a resume: 3 steps on 2 NPUs then 3 on 1, and 3 on 1 then 3 on 2, each
    end as 6 uninterrupted steps on one (run once for both)."""
    constant = [*checks.RUN, *NPU, "--lr-scheduler", "constant", "--warmup-steps", "0"]

    def run(processes: int, steps: int, out, *more):
        args = [*constant, "--steps", str(steps), "--batch", str(4 // processes), *more]
        if processes == 1:
            return checks.single(out, args, env=_environment(1))
        env = checks.audited_env(out, tmp_path / f"w{steps}") | {"ACLEMU_DEVICE_COUNT": "2"}
        result = checks.torchrun(*args, "--zero", "1", "--out", str(out), env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        return out

    reference = run(1, 6, tmp_path / "uninterrupted")
    for first, then in ((2, 1), (1, 2)):
        out = run(first, 3, tmp_path / f"{first}-to-{then}")
        run(then, 6, out, "--resume")
        checks.assert_same_run(out, reference)


_INIT_ALONE = """
import sys
from ort_ascend_ops import aclnn_emulator
from ort_ascend_ops.training.api.hccl import Communicator, HcclError

class Store:  # torch.distributed's store as the communicator uses it: rank 0 sets, others get
    def set(self, key, value):
        self.value = value

aclnn_emulator.activate()
store = Store()
try:
    Communicator(store, "root", 0, 2, 0, timeout_seconds=1)
except HcclError as error:
    print(error)
    sys.exit(3)
"""


def test_an_hccl_initialisation_failure_names_the_rank_and_the_call(tmp_path):
    """Rank 0 of 2 alone (rank 1 never comes): HCCL's connect timeout, set from the group's,
    ends the wait with an error naming the call, the rank and the rank that did not arrive; run
    with the plain onnxruntime too (the communicator needs no execution provider)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _INIT_ALONE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr[-3000:]
    said = done.stdout
    assert "HcclCommInitRootInfo (rank 0 of 2, device 0) failed" in said and "rank 1" in said, said
