"""One rank of ``test_data_parallel``'s API checks, run by ``torchrun --nproc_per_node 2``: the
training API over torch.distributed's default group as a user drives it, on the tiny linear
models the test wrote (``<argv[1]>/<precision>/``). Each scenario saves what this rank saw into
``<argv[2]>/<scenario>.rank<r>.npz``; the test holds it to float64 and ``torch.optim`` oracles."""

import logging
import sys
from pathlib import Path

import numpy as np
import torch.distributed as dist

from ort_ascend_ops.training.api import CheckpointState, Module, Optimizer, clip_grad_norm_
from ort_ascend_ops.training.artifacts import artifact_paths

MAX_NORM = 0.05


def rows(rank: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's half of the global batch (the test draws the same)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8), dtype=np.float32)
    t = rng.standard_normal((4, 8), dtype=np.float32)
    return x[2 * rank : 2 * rank + 2], t[2 * rank : 2 * rank + 2]


def start(name: str, zero: int = 0, native: bool = True, threads: int = 1):
    paths = artifact_paths(Path(sys.argv[1]) / name)
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state, threads=threads, native=native)
    return state, module, Optimizer(paths["optimizer"], module, zero=zero)


def averaged(rank: int, zero: int, native: bool = True, threads: int = 1) -> None:
    """One step: the averaged gradients, the clipped norm, the updated parameters. The portable
    path (``native=False``) updates into a second buffer, which ZeRO copies back."""
    state, module, optimizer = start("fp32", zero, native, threads)
    x, t = rows(rank)
    loss = module(x, t)
    grads = {n: p.grad for n, p in state.parameters.items()}
    norm = clip_grad_norm_(module, MAX_NORM)
    clipped = {n: p.grad for n, p in state.parameters.items()}
    assert optimizer.step()
    saved = {f"grad/{n}": g for n, g in grads.items()} | {f"clipped/{n}": g for n, g in clipped.items()}
    saved |= {f"param/{n}": p.data for n, p in state.parameters.items()}
    saved |= {"loss": loss, "norm": np.float64(norm), "owned": np.array(optimizer.owned)}
    name = f"zero{zero}" + ("" if native else "-portable")
    np.savez(Path(sys.argv[2]) / f"{name}.rank{rank}.npz", **saved)


def overflow_on_one_rank(rank: int) -> None:
    """fp16-mixed: rank 0's batch overflows float16, rank 1's does not; then both are finite."""
    state, module, optimizer = start("fp16-mixed")
    before = {n: p.data for n, p in state.parameters.items()}
    x, t = rows(rank)
    module(x * (1e4 if rank == 0 else 1.0), t)
    took_first = optimizer.step()
    module.lazy_reset_grad()
    unchanged = all(np.array_equal(before[n], p.data) for n, p in state.parameters.items())
    scale_after_skip = optimizer.get_loss_scale()
    module(x, t)
    took_second = optimizer.step()
    saved = {f"param/{n}": p.data for n, p in state.parameters.items()}
    saved |= {"took": np.array([took_first, took_second]), "unchanged": np.array(unchanged)}
    saved |= {
        "scale": np.array([scale_after_skip, optimizer.get_loss_scale()]),
        "steps": optimizer.step_count,
    }
    np.savez(Path(sys.argv[2]) / f"fp16.rank{rank}.npz", **saved)


class Said(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


if __name__ == "__main__":
    said = Said()
    logging.getLogger("ort_ascend_ops").addHandler(said)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    averaged(rank, zero=0)
    averaged(rank, zero=1)
    averaged(rank, zero=1, native=False, threads=2)
    overflow_on_one_rank(rank)
    dist.destroy_process_group()
    # Four modules took the default group without being given it: the log says so once.
    assert [line for line in said.lines if "default group" in line] == said.lines and len(said.lines) == 1, (
        said.lines
    )
