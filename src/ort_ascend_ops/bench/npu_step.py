"""``python -m ort_ascend_ops bench npu_step [ROW ...]``: the NPU's goals for a training step, per
row of the architecture matrix and precision (``--precision``, default all three), on the CANN EP
over whatever CANN runtime this process loaded (the emulator's in the CANN job):

- the share of the training and optimizer sessions' nodes that ran on the NPU, from ONNX Runtime's
  profile (goal: 100%), and the copies it inserted;
- the bytes over the bus in a step, against the goal of 2 x (input ids + labels) + 4 KiB;
- the device's peak in that step beside the model state (parameters, gradients, optimizer
  states), the rest being the activations, the workspace and what ONNX Runtime's arena keeps.

The bytes and the peak are the emulator's counters; on Ascend hardware, which has none, those
columns say so. Three AdamW steps; the third is metered (the first two make the sessions and the
optimizer states)."""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from .. import aclnn_emulator
from ..cann_ep import step_report
from ..cann_ep.placement import read_profile
from . import report

ROWS = ("llama", "qwen3", "gemma2", "mixtral", "qwen3_moe", "deepseek_v3")
PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed")
STEPS = 3
SLACK = 4096  # the goal's bytes for scalars: learning rate, step, loss, found-inf flag, norm


def measure(name: str, precision: str, folder: Path) -> dict:
    """One row at one precision: placement, bus and device memory of its third step."""
    from ..examples import architectures
    from ..examples.hf_models import torch_inputs
    from ..training import export_torch
    from ..training.api import CheckpointState, Module, Optimizer, training_session_options
    from ..training.artifacts import generate_artifacts
    from ..training.optim import AdamW

    arch = next(a for a in architectures.ARCHITECTURES if a.name == name)
    data = architectures.batch(arch)
    paths = generate_artifacts(
        export_torch(architectures.language_model(arch), torch_inputs(data)),
        optimizer=AdamW(lr=1e-3),
        artifact_directory=folder,
        precision=precision,
    )
    options = {
        s: step_report.profiled_options(training_session_options(), folder / "profile", s)
        for s in ("training", "optimizer")
    }
    state = CheckpointState.load_checkpoint(paths["checkpoint"], device="npu")
    module = Module(paths["training"], state, device="npu", session_options=options["training"])
    optimizer = Optimizer(paths["optimizer"], module, session_options=options["optimizer"])
    counters = aclnn_emulator.counters()
    for step in range(STEPS):
        if step == STEPS - 1 and counters is not None:
            counters.aclemu_reset()
        module(data["input_ids"], data["labels"])
        optimizer.step()
        module.lazy_reset_grad()
    sessions = {"training": module.training_session, "optimizer": optimizer.session}
    placed = {s: read_profile(session.end_profiling()) for s, session in sessions.items()}
    values = [p.value for p in state.parameters.values()]
    values += [p.grad_value for p in state.parameters.values() if p.grad_value is not None]
    if state.optimizer_state is not None:
        values += [v for per_name in state.optimizer_state.values.values() for v in per_name.values()]
    batch = data["input_ids"].nbytes + data["labels"].nbytes
    result = {
        "row": name,
        "precision": precision,
        "nodes": {s: sum(p.nodes.values()) for s, p in placed.items()},
        "on_npu": {s: p.nodes.get(aclnn_emulator.CANN_EP, 0) for s, p in placed.items()},
        "on_host": {s: p.on_host for s, p in placed.items()},
        "copies": {s: p.copies for s, p in placed.items()},
        "batch": batch,
        "bound": 2 * batch + SLACK,
        "state": step_report.state_bytes(values),
    }
    if counters is not None:
        result |= {
            "h2d": counters.aclemu_copied_bytes(b"H2D"),
            "d2h": counters.aclemu_copied_bytes(b"D2H"),
            "peak": counters.aclemu_device_bytes_peak(),
        }
    return result


def _row(r: dict) -> str:
    on_npu, nodes = sum(r["on_npu"].values()), sum(r["nodes"].values())
    copies = sum(n for per in r["copies"].values() for n in per.values())
    placement = f"{on_npu} of {nodes} ({on_npu / nodes:.1%})" + (f", {copies} copies" if copies else "")
    if "h2d" not in r:
        return f"| {r['row']} | {r['precision']} | {placement} | not counted | | not counted | {r['state'] / 2**20:.2f} |"
    moved = r["h2d"] + r["d2h"]
    verdict = "within" if moved <= r["bound"] else "OVER"
    return (
        f"| {r['row']} | {r['precision']} | {placement} | {r['h2d']:,} / {r['d2h']:,} | {verdict} {r['bound']:,} | "
        f"{r['peak'] / 2**20:.2f} | {r['state'] / 2**20:.2f} ({(r['peak'] - r['state']) / 2**20:.2f} the rest) |"
    )


HEADER = [
    "| row | precision | nodes on the NPU | bus per step, H2D / D2H bytes | goal: at most | device peak, MB | model state, MB |",
    "|---|---|---:|---:|---:|---:|---:|",
]


def main(
    names: Sequence[str],
    precisions: Sequence[str],
    command: str,
    json_path: str | None = None,
    markdown_path: str | None = None,
) -> int:
    if not aclnn_emulator.through_cann_ep():
        print(
            "bench npu_step: needs onnxruntime-cann's CANNExecutionProvider (.ci/cann-ep's venv)",
            file=sys.stderr,
        )
        return 2
    unknown = sorted(set(names) - set(ROWS))
    if unknown:
        print(f"bench npu_step: unknown rows {unknown}; choose from {list(ROWS)}", file=sys.stderr)
        return 2
    aclnn_emulator.activate()
    date = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    lines = [f"`{command}` ({date}; {STEPS} AdamW steps, the last metered)", "", *HEADER]
    print("\n".join(lines), flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="npu_step_") as tmp:
        for name in names or ROWS:
            for precision in precisions or PRECISIONS:
                result = measure(name, precision, Path(tmp) / name / precision)
                results.append(result)
                lines.append(_row(result))
                print(lines[-1], flush=True)
    if aclnn_emulator.counters() is None:
        lines += ["", step_report.NO_COUNTERS]
        print(lines[-1])
    report.write_run(command, date, results, lines, json_path, markdown_path)
    return 0
