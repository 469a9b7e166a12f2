"""Peak RSS of a training step, per engine, for ``bench training_step``: each engine runs a few
steps in a child process of its own (``python -m ort_ascend_ops.bench.training_memory JOB``) that
imports only what the engine needs (ours: no torch), and reports the kernel's high-water mark of
its resident memory (``VmHWM``) with its losses. What a user's training process would hold: the
runtime, the weights, the optimizer states, the step's activations."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ENGINES = ("ours native", "ours portable", "PyTorch eager", "torch.compile")


def peak_rss() -> int:
    """This process's high-water mark of resident memory, in bytes."""
    with open("/proc/self/status") as status:
        return int(status.read().split("VmHWM:")[1].split()[0]) * 1024


def _timed(step, steps: int) -> tuple[list[float], list[float]]:
    """``step()``'s losses and seconds, ``steps`` times."""
    losses, seconds = [], []
    for _ in range(steps):
        start = time.perf_counter()
        losses.append(step())
        seconds.append(time.perf_counter() - start)
    return losses, seconds


def _ours(job: dict, native: bool) -> tuple[list[float], list[float]]:
    import numpy as np

    from ..training.api import CheckpointState, Module, Optimizer

    # An .npz holds an input each, by name (packed rows: positions, boundaries); an .npy the
    # token ids, fed as the labels too.
    data = np.load(job["batch"])
    state = CheckpointState.load_checkpoint(job["paths"]["checkpoint"])
    module = Module(job["paths"]["training"], state, threads=job["threads"], native=native)
    optimizer = Optimizer(job["paths"]["optimizer"], module)
    feeds = [data[name] for name in module.input_names()] if job["batch"].endswith(".npz") else [data] * 2

    def step() -> float:
        loss = module(*feeds)
        optimizer.step()
        module.lazy_reset_grad()
        return float(loss[0] if isinstance(loss, tuple) else loss)

    return _timed(step, job["steps"])


def precision_of(engine: str) -> str:
    """The precision an engine's name ends with ("PyTorch eager bf16-mixed"), fp32 by default."""
    from ..training.precision import PRECISIONS

    return next((p for p in PRECISIONS if p != "fp32" and engine.endswith(p)), "fp32")


class TorchStep:
    """One training step of a transformers causal LM as a PyTorch user runs it at ``precision``:
    forward with its labels under ``torch.autocast`` (off for fp32), backward and AdamW through a
    ``GradScaler`` (enabled for fp16 only). ``optimizer``: ``torch.optim.AdamW`` unless given."""

    def __init__(self, model, precision: str = "fp32", optimizer=None):
        import torch

        self.model = model
        self.optimizer = optimizer or torch.optim.AdamW(model.parameters())
        low = {"bf16-mixed": torch.bfloat16, "fp16-mixed": torch.float16}.get(precision)
        self.autocast = torch.autocast("cpu", dtype=low, enabled=low is not None)
        self.scaler = torch.amp.GradScaler("cpu", enabled=precision == "fp16-mixed")

    def __call__(self, ids) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast:
            loss = self.model(input_ids=ids, labels=ids).loss
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return float(loss.detach())


def torch_model(job: dict):
    """The job's transformers model (``architecture``, ``config``, ``weights``) in training
    mode, torch at the job's ``threads``; with ``checkpointing``, Hugging Face's gradient
    checkpointing on."""
    import torch
    import transformers

    torch.set_num_threads(job["threads"])
    config = getattr(transformers, job["architecture"])(**job["config"])
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.load_state_dict(torch.load(job["weights"]))
    if job.get("checkpointing"):
        model.gradient_checkpointing_enable()
    if job.get("lora"):  # PEFT's adapters on the frozen model: {"r": ..., "target_modules": ...}
        import peft

        model = peft.get_peft_model(model, peft.LoraConfig(**job["lora"]))
    return model.train()


def _torch(job: dict, compiled: bool, precision: str) -> tuple[list[float], list[float]]:
    import numpy as np
    import torch

    model = torch_model(job)
    trained = [p for p in model.parameters() if p.requires_grad]
    step = TorchStep(torch.compile(model) if compiled else model, precision, torch.optim.AdamW(trained))
    ids = torch.from_numpy(np.load(job["batch"]))
    return _timed(lambda: step(ids), job["steps"])


def child(job_path: str) -> None:
    job = json.loads(Path(job_path).read_text())
    engine = job["engine"]  # a name of ENGINES, or one with a mixed precision after it
    if engine.startswith("ours"):
        losses, seconds = _ours(job, native=engine.startswith("ours native"))
    else:
        compiled = engine.startswith("torch.compile")
        losses, seconds = _torch(job, compiled=compiled, precision=precision_of(engine))
    print(json.dumps({"peak_rss": peak_rss(), "losses": losses, "seconds": seconds}))


def measure(job: dict, folder: Path) -> dict:
    """One engine's child process on ``job`` (engine, threads, steps, batch file and the engine's
    model: artifact paths, or architecture, config and weights): its peak RSS and losses, or the
    error it ended with."""
    path = folder / f"memory_{job['engine'].replace(' ', '_').replace('=', '_')}_{job['seq']}.json"
    path.write_text(json.dumps(job))
    return run_child([sys.executable, "-m", "ort_ascend_ops.bench.training_memory", str(path)])


def run_child(command: list[str], timeout: float | None = None):
    """The JSON a child process prints last, or ``{"error": ...}``: the last line of its stderr,
    or that it gave no result within ``timeout`` seconds (a guard against a hang)."""
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout:g} s"}
    if run.returncode:
        return {"error": (run.stderr.strip().splitlines() or [f"exit code {run.returncode}"])[-1]}
    return json.loads(run.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    child(sys.argv[1])
