"""``python -m ort_ascend_ops bench training_step --nproc 1,2 [CONFIG]``: data parallel's cost on
this machine. Each engine trains the config's model for a few steps in N processes started by
``torchrun`` (gloo), each process on its rows of a global batch of N times the config's batch, at
the same thread count whatever N, so that N = 1 is the baseline of a process's own work and the
difference is what running in N processes costs (on a machine of few cores, overhead, not
speedup). The engines:

- ours native: ``training.api`` Module and Optimizer over the default group (gradients averaged
  in buckets after the backward);
- ours native ZeRO-1: the same with ``Optimizer(zero=1)`` (reduce-scatter, shard update, the
  parameters broadcast from their owners);
- PyTorch DDP: ``DistributedDataParallel`` with ``torch.optim.AdamW`` (its buckets all-reduced
  during the backward);
- PyTorch DDP + ZeroRedundancyOptimizer: torch's ZeRO stage 1 over DDP.

Per rank: the median step time, the time in the collectives of the gradients and parameters
(ours: ``Ranks.seconds``; DDP: its own logging's ``backward_comm_time``) and how much of it the
backward hid (DDP's ``backward_compute_comm_overlap_time``; ours: none, ONNX Runtime runs the
backward as one call), the peak RSS (``VmHWM``). Needs the ``[torch]`` extra."""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import training_memory

ENGINES = {  # name: (runtime, ZeRO stage)
    "ours native": ("ours", 0),
    "ours native ZeRO-1": ("ours", 1),
    "PyTorch DDP": ("torch", 0),
    "PyTorch DDP + ZeroRedundancyOptimizer": ("torch", 1),
}


class _Ours:
    """``training_step``'s engine of ours over the group ``DataParallel.join`` starts."""

    def __init__(self, job: dict, zero: int, ids: np.ndarray):
        from ..training.api import DataParallel
        from .training_step import _Ours

        parallel = DataParallel.join()
        self.step = _Ours(job["paths"], job["threads"], True, ids, zero=zero, process_group=parallel)

    def __call__(self) -> float:
        self.step()
        return self.step.losses[-1]

    def communication(self) -> tuple[float, float]:
        """Seconds in collectives so far, and of them hidden behind compute (none)."""
        parallel = self.step.module.data_parallel
        return (0.0 if parallel is None else parallel.seconds), 0.0

    def leave(self) -> None:
        from ..training.api.data_parallel import leave

        leave()


class _Torch:
    """``training_memory.TorchStep`` of the job's model, under DDP in many processes."""

    def __init__(self, job: dict, zero: int, ids: np.ndarray):
        import torch
        import torch.distributed as dist

        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        model = training_memory.torch_model(job)
        self.ddp, optimizer = None, None
        if self.world > 1:
            dist.init_process_group("gloo")
            self.ddp = torch.nn.parallel.DistributedDataParallel(model)
            self.ddp._set_ddp_runtime_logging_sample_rate(1)  # its comm times every step
            model = self.ddp
            if zero:
                from torch.distributed.optim import ZeroRedundancyOptimizer

                optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW)
        self.step: training_memory.TorchStep | None = training_memory.TorchStep(model, optimizer=optimizer)
        self.ids, self.torch = torch.from_numpy(ids), torch
        self.comm = self.hidden = 0.0

    def __call__(self) -> float:
        assert self.step is not None
        loss = self.step(self.ids)
        if self.ddp is not None:
            logged = self.ddp._get_ddp_logging_data()
            self.comm += logged.get("backward_comm_time", 0) / 1e9
            self.hidden += logged.get("backward_compute_comm_overlap_time", 0) / 1e9
        return loss

    def communication(self) -> tuple[float, float]:
        return self.comm, self.hidden

    def leave(self) -> None:
        # DDP's reducer holds the process group: freed last, it would join gloo's threads holding
        # the GIL that one of them waits for (a deadlock at exit, seen with torch 2.13).
        self.step = self.ddp = None
        gc.collect()
        if self.world > 1:
            self.torch.distributed.destroy_process_group()


def child(job_path: str) -> None:
    """One rank of one engine: its steps timed, then every rank's figures printed by rank 0."""
    job = json.loads(Path(job_path).read_text())
    rank = int(os.environ.get("RANK", "0"))
    runtime, zero = ENGINES[job["engine"]]
    b = job["batch_per_rank"]
    ids = np.load(job["batch"])[rank * b : (rank + 1) * b]
    engine = (_Ours if runtime == "ours" else _Torch)(job, zero, ids)
    times, losses = [], []
    comm_before, hidden_before = engine.communication()
    for i in range(job["warmup"] + job["steps"]):
        if i == job["warmup"]:
            comm_before, hidden_before = engine.communication()
        start = time.perf_counter()
        losses.append(engine())
        times.append(time.perf_counter() - start)
    comm, hidden = engine.communication()
    record = {
        "rank": rank,
        "step_s": statistics.median(times[job["warmup"] :]),
        "comm_s": (comm - comm_before) / job["steps"],
        "hidden_s": (hidden - hidden_before) / job["steps"],
        "peak_rss": training_memory.peak_rss(),
        "losses": losses,
    }
    records = [record]
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch.distributed as dist

        gathered: list = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, record)
        records = gathered
    engine.leave()
    if rank == 0:
        print(json.dumps(records))


def _launch(job: dict, nproc: int, folder: Path) -> list[dict] | dict:
    """The ranks' records of one engine in ``nproc`` processes, or the error it ended with."""
    path = folder / f"dp_{job['engine'].replace(' ', '_')}_{nproc}.json"
    path.write_text(json.dumps(job))
    module = ["-m", "ort_ascend_ops.bench.data_parallel", str(path)]
    launcher = (
        ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)] if nproc > 1 else []
    )
    return training_memory.run_child([sys.executable, *launcher, *module], timeout=3600)


def run_config(
    name: str, spec: dict, nprocs: Sequence[int], steps: int, warmup: int, folder: Path, say=print
) -> dict:
    import torch

    from ..training.artifacts import generate_artifacts
    from ..training.optim import AdamW
    from .training_step import build_model, export_model

    b, seq = spec["batch"], spec["seq"]
    threads = max(1, len(os.sched_getaffinity(0)) // max(nprocs))
    say(
        f"\n## {name} in {', '.join(map(str, nprocs))} processes: {spec['title']}; batch {b} x seq {seq} "
        f"per process, {threads} thread{'s' if threads > 1 else ''} each"
    )
    model = build_model(spec)
    ids = np.random.default_rng(0).integers(
        0, spec["config"]["vocab_size"], (b * max(nprocs), seq), dtype=np.int64
    )
    paths = generate_artifacts(
        export_model(model, ids[:b]), loss=None, optimizer=AdamW(), artifact_directory=folder / "ours"
    )
    weights, batch = folder / "weights.pt", folder / "batch.npy"
    torch.save(model.state_dict(), weights)
    np.save(batch, ids)
    job = {"threads": threads, "steps": steps, "warmup": warmup, "batch": str(batch), "batch_per_rank": b}
    job |= {"paths": {k: str(v) for k, v in paths.items()}, "weights": str(weights)}
    job |= {"architecture": spec.get("architecture", "LlamaConfig"), "config": spec["config"]}
    runs: dict[str, dict[int, list[dict] | dict]] = {}
    for nproc in nprocs:
        for engine, (_, zero) in ENGINES.items():
            if zero and nproc == 1:
                continue  # ZeRO over one process is the plain optimizer
            runs.setdefault(engine, {})[nproc] = result = _launch(job | {"engine": engine}, nproc, folder)
            say(f"{engine}, {nproc} processes: " + (result["error"] if isinstance(result, dict) else "done"))
    return {"name": name, "title": spec["title"], "batch": b, "seq": seq, "threads": threads, "runs": runs}


def table(result: dict) -> list[str]:
    """Per engine and process count: the slowest rank's step, its collectives, what the backward
    hid of them, the tokens of all ranks per second, the step's cost over one process of the same
    engine, and the largest per-rank peak RSS against one process's and against ours without
    ZeRO at the same count."""
    tokens = result["batch"] * result["seq"]
    lines = [
        "| engine | processes | ms/step (slowest rank) | of it in collectives (ms) | hidden by the backward "
        "| tokens/s, all ranks | step vs 1 process | peak RSS per rank (MB) | vs 1 process | vs ours "
        "native, same processes |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = "ours native"
    for engine, by_count in result["runs"].items():
        plain = "PyTorch DDP" if engine.startswith("PyTorch") else base
        for nproc, records in by_count.items():
            if isinstance(records, dict):
                lines.append(f"| {engine} | {nproc} | failed: {records['error']} |" + " |" * 7)
                continue
            step = max(r["step_s"] for r in records)
            comm = max(r["comm_s"] for r in records)
            hidden = max(r["hidden_s"] for r in records)
            rss = max(r["peak_rss"] for r in records)
            one = result["runs"].get(plain, {}).get(1)
            theirs = result["runs"].get(base, {}).get(nproc)
            one_step = max(r["step_s"] for r in one) if isinstance(one, list) else None
            one_rss = max(r["peak_rss"] for r in one) if isinstance(one, list) else None
            ours_rss = max(r["peak_rss"] for r in theirs) if isinstance(theirs, list) else None
            lines.append(
                f"| {engine} | {nproc} | {step * 1e3:.0f} | {comm * 1e3:.1f} | "
                + (f"{hidden / comm * 100:.0f}%" if comm else "-")
                + f" | {nproc * tokens / step:,.0f} | "
                + (f"{step / one_step:.2f}x" if one_step else "-")
                + f" | {rss / 2**20:.0f} | "
                + (f"{(rss - one_rss) / 2**20:+.0f} MB" if one_rss else "-")
                + " | "
                + (f"{rss / ours_rss:.2f}x" if ours_rss else "-")
                + " |"
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

    from . import cpu, peers, report
    from .training_step import _configs

    # torchrun starts every engine's processes, and each engine trains a transformers model or
    # its export: without either nothing can run.
    needs = "--nproc needs torch.distributed (torchrun) and the transformers models; nothing ran"
    absent = [] if peers.torch_module() is not None else [peers.absent("PyTorch", peers.TORCH_INSTALL, needs)]
    if not peers.importable("transformers"):
        absent.append(peers.absent("transformers", peers.TRANSFORMERS_INSTALL, needs))
    if absent:
        print("\n".join(absent), file=sys.stderr)
        return 2
    configs = _configs()
    machine = report.machine()
    date = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    heading = f"`{command}` ({date}; {cpu.summary(machine['cpu'])}; {machine['cores']} cores)"
    print(heading, flush=True)
    lines, results = [heading, ""], []
    with tempfile.TemporaryDirectory(prefix="data_parallel_") as tmp:
        for name in names or ["llama512"]:
            folder = Path(tmp) / name
            folder.mkdir()
            result = run_config(name, configs[name], nprocs, steps, warmup, folder)
            results.append(result)
            part = [
                f"**{name}** in {', '.join(map(str, nprocs))} processes (torchrun, gloo): {result['title']}; "
                f"batch {result['batch']} x seq {result['seq']} per process, {result['threads']} "
                f"thread{'s' if result['threads'] > 1 else ''} each; median of {steps} steps after {warmup}",
                "",
                *table(result),
                "",
            ]
            print("\n".join(part), flush=True)
            lines += part
    if json_path:
        Path(json_path).write_text(
            json.dumps({"command": command, "date": date, "machine": machine, "results": results}, indent=2)
        )
    if markdown_path:
        Path(markdown_path).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    child(sys.argv[1])
