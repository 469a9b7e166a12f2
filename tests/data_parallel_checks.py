"""What the data-parallel tests share: torchrun and one process running ``train`` on byte_llama,
and the comparison of a run of N processes with one of N times the batch (per-step losses and
gradient norms, final parameters and optimizer states), never of a run with itself."""

import csv
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ort_ascend_ops.training.checkpoint import read, read_properties

TESTS = Path(__file__).parent
MODEL = str(TESTS.parent / "models" / "byte_llama.onnx")
AUDIT = str(TESTS / "rank_audit.py")
# torchrun on a port of its own, so that tests running side by side do not meet.
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
RUN = ["--seq", "32", "--lr", "3e-3", "--save-every", "2", "--eval-every", "3", "--threads", "1"]
# float32 sums in another order (each rank adds its half of the batch, gloo adds the halves) move
# a float32 run by about 2e-7 relative; a mixed run rounds each step's weights to the low type,
# where such a difference flips a rounding now and then: measured within half the type's epsilon
# on Zen 4, and bf16's up to 1.1e-2 on Zen 3 (one step's gradient norm: ONNX Runtime's AVX2 sgemm
# rounds elsewhere than its AVX-512 one), within bf16's epsilon.
TOLERANCE = {"fp32": 1e-5, "bf16-mixed": 2.0**-6, "fp16-mixed": 2.0**-10}


def torchrun(*args, env):
    command = [*TORCHRUN, "--nproc_per_node", "2", AUDIT, "train", MODEL, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True)


def audited_env(out: Path, log: Path) -> dict:
    return {**os.environ, "AUDIT_OUT": str(out), "AUDIT_LOG": str(log)}


def single(out: Path, args, env: dict | None = None) -> Path:
    result = subprocess.run(
        [sys.executable, "-m", "ort_ascend_ops", "train", MODEL, *args, "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return out


def rows(out: Path) -> list[dict]:
    with open(out / "losses.csv") as f:
        return list(csv.DictReader(f))


def losses(out: Path) -> list[float]:
    return [float(r["loss"]) for r in rows(out)]


def distance(a: dict, b: dict) -> float:
    x = np.concatenate([a[k].ravel() for k in sorted(a)]).astype(np.float64)
    y = np.concatenate([b[k].ravel() for k in sorted(b)]).astype(np.float64)
    return float(np.linalg.norm(x - y) / np.linalg.norm(y))


def relative(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) / abs(y) for x, y in zip(a, b, strict=True))


def assert_same_run(ours: Path, reference: Path, precision: str = "fp32"):
    tolerance = TOLERANCE[precision]
    a, b = read(ours / "checkpoint.safetensors"), read(reference / "checkpoint.safetensors")
    rows_a, rows_b = rows(ours), rows(reference)
    assert [r["step"] for r in rows_a] == [r["step"] for r in rows_b]
    assert [r["skipped"] for r in rows_a] == [r["skipped"] for r in rows_b], "another loss-scale decision"
    assert relative(losses(ours), losses(reference)) <= tolerance
    norms = [[float(r["grad_norm"]) for r in rows] for rows in (rows_a, rows_b)]
    assert relative(*norms) <= tolerance
    apart = distance(a.parameters, b.parameters)
    assert apart <= tolerance
    assert a.optimizer == b.optimizer
    for state in b.optimizer_states:
        assert set(a.optimizer_states[state]) == set(b.optimizer_states[state])
        assert distance(a.optimizer_states[state], b.optimizer_states[state]) <= tolerance
    start = read(reference / "artifacts" / "checkpoint.safetensors").parameters
    moved = distance(b.parameters, start)
    assert moved > 10 * apart, f"training moved the parameters {moved:.1e}, their difference is {apart:.1e}"


def wait_for_step(checkpoint: Path, step: int, process) -> None:
    while process.poll() is None:
        if checkpoint.exists() and int(read_properties(checkpoint).get("step", 0)) >= step:
            return
        time.sleep(0.02)
    raise AssertionError(f"the run ended before step {step}: {process.stderr.read()[-2000:]}")


def workers(torchrun_pid: int, rank: int) -> list[int]:
    """The pids of the processes whose environment says RANK=rank under that torchrun."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
        if parent == torchrun_pid and f"RANK={rank}".encode() in environ:
            found.append(int(entry.name))
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ranks_without_agent(args_of_rank, env_of_rank=lambda rank: {}):
    """Two ranks as plain processes (the environment torchrun would set, no agent to kill the
    survivor), as on two machines."""
    port = free_port()
    processes = []
    for rank in range(2):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            **env_of_rank(rank),
        }
        processes.append(
            subprocess.Popen(
                [sys.executable, AUDIT, "train", MODEL, *args_of_rank(rank)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return processes
