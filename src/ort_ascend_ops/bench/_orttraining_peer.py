"""The onnxruntime-training peer of ``bench training_step``, run as a script by another venv's
Python (onnxruntime-training 1.19.2 with torch and transformers; it cannot import this package).
It reads a JSON job (argv[1]): the Llama config, the weights (a ``torch.save``d state dict), the
batch (``.npy``), the thread counts and step counts; prints one JSON line of results, with the
peak RSS of the process (with ``"memory"`` in the job: of the training loop alone, counted from
after the export, torch still imported).

The model is exported as onnxruntime-training needs it: TorchScript exporter (dynamo=False),
opset 17, eager attention, an all-ones attention mask inside the wrapper (transformers 5 calls
``torch.diff`` on a missing mask, which that exporter cannot export); AdamW with torch's defaults
(eps 1e-8, weight decay 0.01; ORT's own defaults are 1e-6 and 0)."""

import gc
import json
import os
import statistics
import sys
import time

import numpy as np
import onnx
import torch
from onnxruntime import SessionOptions
from onnxruntime.training import artifacts, onnxblock
from onnxruntime.training.api import CheckpointState, Module, Optimizer
from transformers import LlamaConfig, LlamaForCausalLM


class _Wrap(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, input_ids, labels):
        out = self.m(
            input_ids=input_ids, attention_mask=torch.ones_like(input_ids), labels=labels, use_cache=False
        )
        return out.loss


def main(job_path: str) -> None:
    job = json.load(open(job_path))
    work = job["work"]
    os.makedirs(work, exist_ok=True)
    model = LlamaForCausalLM(LlamaConfig(**job["config"], attn_implementation="eager"))
    model.load_state_dict(torch.load(job["weights"]))
    model.train()
    ids = np.load(job["batch"])
    x = torch.from_numpy(ids)
    start = time.perf_counter()
    base = f"{work}/base.onnx"
    torch.onnx.export(
        _Wrap(model),
        (x, x),
        base,
        input_names=["input_ids", "labels"],
        output_names=["loss"],
        opset_version=17,
        dynamo=False,
        do_constant_folding=False,
        export_params=True,
    )
    export_s = time.perf_counter() - start
    start = time.perf_counter()
    graph = onnx.load(base)
    params = {"m." + n for n, _ in model.named_parameters()}
    # A Linear on a 3-D input exports its weight transposed, as an onnx::MatMul_* initializer.
    grads = [i.name for i in graph.graph.initializer if i.name in params or i.name.startswith("onnx::MatMul")]
    artifacts.generate_artifacts(
        graph,
        requires_grad=grads,
        loss=None,
        artifact_directory=work,
        optimizer=onnxblock.optim.AdamW(eps=1e-8, weight_decay=0.01),
    )
    artifacts_s = time.perf_counter() - start
    if job.get("memory"):
        # The training loop's peak from here on: the exporter's model and buffers let go first.
        del model, x, graph
        gc.collect()
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    runs: list[dict[str, object]] = []
    results = {"export_s": export_s, "artifacts_s": artifacts_s, "runs": runs}
    for threads in job["threads"]:
        options = SessionOptions()
        options.intra_op_num_threads = threads
        state = CheckpointState.load_checkpoint(f"{work}/checkpoint")
        module = Module(
            f"{work}/training_model.onnx", state, f"{work}/eval_model.onnx", session_options=options
        )
        optimizer = Optimizer(f"{work}/optimizer_model.onnx", module)
        optimizer.set_learning_rate(1e-3)
        times, losses = [], []
        for _ in range(job["warmup"] + job["steps"]):
            begin = time.perf_counter()
            loss = module(ids, ids)
            optimizer.step()
            module.lazy_reset_grad()
            times.append(time.perf_counter() - begin)
            losses.append(float(loss[0] if isinstance(loss, (tuple, list)) else loss))
        timed = times[job["warmup"] :]
        runs.append(
            {
                "threads": threads,
                "median_s": statistics.median(timed),
                "spread": (max(timed) - min(timed)) / statistics.median(timed),
                "steps": len(timed),
                "first_loss": losses[0],
            }
        )
        del module, optimizer, state
    with open("/proc/self/status") as status:
        results["peak_rss"] = int(status.read().split("VmHWM:")[1].split()[0]) * 1024
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
