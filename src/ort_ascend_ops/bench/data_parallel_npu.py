"""``python -m ort_ascend_ops bench training_step --nproc 1,2 --device npu [CONFIG]``: data parallel
on NPUs through the CANN execution provider, each rank on npu:LOCAL_RANK, the gradients all-reduced
by HCCL in the training graph (``training.gradient_buckets``). On the emulated CANN runtime (each
rank an emulated device, ``ACLEMU_DEVICE_COUNT``) its counters say, per step of rank 0: the HCCL
calls and the bytes handed to them, and the bytes that crossed the host-device bus (the batch and
scalars: they must not grow with the model). ONNX Runtime's profile of the last step says where
each bucket's all-reduce was launched among the step's nodes: what the backward has left to run
behind it. The emulator runs a stream's work when the host waits for it, so its times say nothing
of the overlap on an NPU; the wait after the backward (the communicator's stream) is reported as
measured, and docs/PERFORMANCE.md models the rest."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import report, training_memory

NEEDS = "--device npu needs onnxruntime-cann's CANNExecutionProvider (an NPU, or the emulated CANN runtime)"


def child(job_path: str) -> None:
    """One rank: its steps, then every rank's figures printed by rank 0."""
    from .. import aclnn_emulator
    from ..training.api import DataParallel, training_session_options
    from .training_step import _Ours

    job = json.loads(Path(job_path).read_text())
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    b = job["batch_per_rank"]
    ids = np.load(job["batch"])[rank * b : (rank + 1) * b]
    parallel = DataParallel.join()
    options = training_session_options(threads=job["threads"])
    options.enable_profiling = rank == 0
    options.profile_file_prefix = str(Path(job_path).with_suffix("")) + "_profile"
    step = _Ours(
        job["paths"],
        job["threads"],
        True,
        ids,
        options=options,
        process_group=parallel,
        device=f"npu:{local}",
    )
    counters = aclnn_emulator.counters()
    times = []
    for i in range(job["warmup"] + job["steps"]):
        if i == job["warmup"]:
            waited = parallel.seconds if parallel is not None else 0.0
            if counters is not None:
                counters.aclemu_reset()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    record = {
        "rank": rank,
        "step_s": statistics.median(times[job["warmup"] :]),
        "wait_s": ((parallel.seconds if parallel is not None else 0.0) - waited) / job["steps"],
        "losses": step.losses,
    }
    if counters is not None:
        per_step = job["steps"]
        record |= {
            "hccl_calls": counters.aclemu_calls(b"HcclAllReduce") / per_step,
            "hccl_bytes": counters.aclemu_collective_bytes(b"HcclAllReduce") / per_step,
            "bus_bytes": sum(counters.aclemu_copied_bytes(d) for d in (b"H2D", b"D2H")) / per_step,
        }
    if rank == 0:
        events = json.loads(Path(step.module.training_session.end_profiling()).read_text())
        nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
        last = sorted(nodes, key=lambda e: e["ts"])[-(len(nodes) // (job["warmup"] + job["steps"])) :]
        names = [e["name"] for e in last]
        record["nodes"] = len(names)
        record["launches"] = [i for i, name in enumerate(names) if "all_reduce_bucket" in name]
    records = [record]
    if parallel is not None:
        records = parallel.objects(record, "the bench's records")
    if rank == 0:
        print(json.dumps(records))


def run_config(name: str, spec: dict, nprocs: Sequence[int], steps: int, warmup: int, folder: Path) -> dict:
    from ..training.artifacts import generate_artifacts
    from ..training.optim import AdamW
    from .training_step import build_model, export_model

    b, seq = spec["batch"], spec["seq"]
    threads = max(1, len(os.sched_getaffinity(0)) // max(nprocs))
    ids = np.random.default_rng(0).integers(
        0, spec["config"]["vocab_size"], (b * max(nprocs), seq), dtype=np.int64
    )
    paths = generate_artifacts(
        export_model(build_model(spec), ids[:b]),
        loss=None,
        optimizer=AdamW(),
        artifact_directory=folder / "ours",
    )
    np.save(folder / "batch.npy", ids)
    job = {"threads": threads, "steps": steps, "warmup": warmup, "batch": str(folder / "batch.npy")}
    job |= {"batch_per_rank": b, "paths": {k: str(v) for k, v in paths.items()}}
    runs = {}
    for nproc in nprocs:
        path = folder / f"npu_{nproc}.json"
        path.write_text(json.dumps(job))
        launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
        command = [sys.executable, *(launcher if nproc > 1 else []), "-m", __name__, str(path)]
        runs[nproc] = training_memory.run_child(command, timeout=3600)
    return {"name": name, "title": spec["title"], "batch": b, "seq": seq, "threads": threads, "runs": runs}


def table(result: dict) -> list[str]:
    """Rank 0's figures per process count."""
    lines = [
        "| processes | ms/step (slowest rank) | HCCL all-reduce calls / bytes per step | bus bytes per step "
        "(the batch: {batch:,}) | buckets launched at node (of the step's) | wait after the backward (ms) |".format(
            batch=2 * result["batch"] * result["seq"] * 8
        ),
        "|---:|---:|---:|---:|---|---:|",
    ]
    for nproc, records in result["runs"].items():
        if isinstance(records, dict):
            lines.append(f"| {nproc} | failed: {records['error']} | | | | |")
            continue
        first = records[0]
        hccl = (
            f"{first['hccl_calls']:g} / {first['hccl_bytes']:,.0f}"
            if "hccl_calls" in first
            else "not counted"
        )
        bus = f"{first['bus_bytes']:,.0f}" if "bus_bytes" in first else "not counted"
        launches = ", ".join(map(str, first["launches"])) or "none (one process)"
        lines.append(
            f"| {nproc} | {max(r['step_s'] for r in records) * 1e3:.0f} | {hccl} | {bus} | "
            f"{launches} of {first['nodes']} | {first['wait_s'] * 1e3:.1f} |"
        )
    return lines


def main(
    names: Sequence[str],
    nprocs: Sequence[int],
    steps: int,
    warmup: int,
    command: str,
    json_path: str | None = None,
    markdown_path: str | None = None,
) -> int:
    import tempfile

    import onnxruntime as ort

    from ..runtime import CANN_EP
    from .training_step import _configs

    if CANN_EP not in ort.get_available_providers():
        print(f"bench: {NEEDS}; this ONNX Runtime has {ort.get_available_providers()}", file=sys.stderr)
        return 2
    configs = _configs()
    os.environ.setdefault("ACLEMU_DEVICE_COUNT", str(max(nprocs)))  # the emulator's: a device per rank
    date = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    lines = [f"`{command}` ({date})", ""]
    print(lines[0], flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="data_parallel_npu_") as tmp:
        for name in names or ["byte_llama"]:
            folder = Path(tmp) / name
            folder.mkdir()
            result = run_config(name, configs[name], nprocs, steps, warmup, folder)
            results.append(result)
            part = [
                f"**{name}** on {', '.join(map(str, nprocs))} NPUs (torchrun, HCCL): {result['title']}; batch "
                f"{result['batch']} x seq {result['seq']} per process; median of {steps} steps after {warmup}",
                "",
                *table(result),
                "",
            ]
            print("\n".join(part), flush=True)
            lines += part
    report.write_run(command, date, results, lines, json_path, markdown_path)
    return 0


if __name__ == "__main__":
    child(sys.argv[1])
