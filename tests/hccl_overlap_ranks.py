"""One rank of test_data_parallel_npu's overlap test, under torchrun on the emulator: byte_llama on
npu:RANK in buckets of 0.25 MB. A step's gradients all-reduced in the graph equal, bit for bit,
the same rank's local gradients all-reduced between runs; rank 0 prints where ONNX Runtime ran each
bucket's all-reduce in the step (its profile) as JSON."""

import json
import os
import sys

import numpy as np
import onnx
import torch.distributed as dist

from ort_ascend_ops.training.api import CheckpointState, DataParallel, Module, training_session_options
from ort_ascend_ops.training.artifacts import generate_artifacts
from ort_ascend_ops.training.optim import AdamW

rank = int(os.environ["RANK"])
folder = sys.argv[1]
paths = generate_artifacts(
    onnx.load(sys.argv[2]), optimizer=AdamW(lr=1e-2), artifact_directory=f"{folder}/rank{rank}"
)
dist.init_process_group("gloo")
parallel = DataParallel(None, bucket_mb=0.25)
device = f"npu:{rank}"
ids = np.random.default_rng(rank).integers(0, 256, (2, 32))


def module(options=None) -> Module:
    state = CheckpointState.load_checkpoint(paths["checkpoint"], device=device)
    return Module(paths["training"], state, device=device, process_group=parallel, session_options=options)


between = module()
with between.no_sync():
    between(ids, ids)
parallel.reduce_device_gradients(between.gradients, None)
options = training_session_options(threads=1)
options.enable_profiling = True
options.profile_file_prefix = f"{folder}/profile{rank}"
in_graph = module(options)
in_graph(ids, ids)
for name in between.gradients.views:
    a, b = (m.state.memory.read(m.gradients.views[name]) for m in (between, in_graph))
    assert np.array_equal(a, b), name
events = json.load(open(in_graph.training_session.end_profiling()))
nodes = sorted(
    (e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")),
    key=lambda e: e["ts"],
)
names = [e["name"].removesuffix("_kernel_time") for e in nodes]
if rank == 0:
    print(json.dumps({"nodes": len(names), "buckets": [i for i, n in enumerate(names) if "all_reduce" in n]}))
dist.destroy_process_group()
