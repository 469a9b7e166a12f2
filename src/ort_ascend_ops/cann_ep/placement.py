"""Where a session's nodes ran and what crossed the bus, read from ONNX Runtime's own profile (the
provider of every node it ran, and the copies it inserted between host and device) and, on the
emulated CANN runtime, from the emulator's counters: never from our own bookkeeping. What an
Ascend user asks first ("is flash attention actually on the NPU?")."""

from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path

from ..runtime import CANN_EP

# The copy nodes ONNX Runtime inserts between providers (transformer_memcpy.cc).
COPIES = ("MemcpyFromHost", "MemcpyToHost")


@dataclasses.dataclass(frozen=True)
class Placement:
    """Per run of a session: ``nodes`` by provider, the op types that ran on the CPU with their
    counts, and ONNX Runtime's copy nodes with the bytes they produced."""

    runs: int
    nodes: dict[str, int]
    on_host: dict[str, int]
    copies: dict[str, int]
    copied_bytes: dict[str, int]

    @property
    def on_device_share(self) -> float:
        total = sum(self.nodes.values())
        return self.nodes.get(CANN_EP, 0) / total if total else 1.0

    def lines(self) -> list[str]:
        total = sum(self.nodes.values())
        lines = [
            f"nodes per run: {total}, on the NPU {self.nodes.get(CANN_EP, 0)} ({self.on_device_share:.1%})"
        ]
        if self.on_host:
            lines.append("on the host: " + ", ".join(f"{op} x{n}" for op, n in self.on_host.items()))
        for copy in COPIES:
            if self.copies.get(copy):
                lines.append(f"{copy}: {self.copies[copy]} per run, {self.copied_bytes[copy]} bytes")
        return lines


def read_profile(path: str | Path) -> Placement:
    """The placement recorded in an ONNX Runtime profile (``SessionOptions.enable_profiling``,
    the file ``end_profiling`` returns), per run: every node's kernel event names its provider;
    the copies ONNX Runtime inserted count as nodes of the EP they ran on (they are the bus)."""
    events = json.loads(Path(path).read_text())
    kernels = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    runs = max(1, sum(1 for e in events if e.get("cat") == "Session" and e["name"] == "model_run"))
    nodes: collections.Counter[str] = collections.Counter()
    on_host: collections.Counter[str] = collections.Counter()
    copies: collections.Counter[str] = collections.Counter()
    copied: collections.Counter[str] = collections.Counter()
    for event in kernels:
        args = event["args"]
        op, provider = args["op_name"], args["provider"]
        if op in COPIES:
            copies[op] += 1
            copied[op] += int(args.get("output_size", 0))
            continue
        nodes[provider] += 1
        if provider != CANN_EP:
            on_host[op] += 1

    def per_run(counter: collections.Counter[str]) -> dict[str, int]:
        return {k: v // runs for k, v in counter.most_common()}

    return Placement(runs, per_run(nodes), per_run(on_host), per_run(copies), per_run(copied))
