"""Timing and the same-run baselines every benchmark is measured against."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Timing:
    median: float  # seconds
    spread: float  # (max - min) / median over the repeats

    def __str__(self) -> str:
        return f"{self.median * 1e3:8.2f} ms ±{self.spread * 100:3.0f}%"


def measure(*fns: Callable[[], object], repeats: int, warmup: int = 1) -> list[Timing]:
    """Times each of ``fns``, taking turns within every repeat so that all of them see the same
    (shared, noisy) machine: the ratios between them are what the benchmarks report."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, samples in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return [Timing(statistics.median(t), (max(t) - min(t)) / statistics.median(t)) for t in times]


class CopyBaseline:
    """A plain memory copy moving ``nbytes`` in all (half read, half written), split over
    ``threads`` threads like the kernel's work: the bandwidth roof the elementwise kernels are
    held to. NumPy's copy releases the GIL, so the threads copy in parallel."""

    def __init__(self, nbytes: int, threads: int):
        chunk = nbytes // 2 // threads
        self.sources = [np.ones(chunk, np.uint8) for _ in range(threads)]
        self.targets = [np.zeros(chunk, np.uint8) for _ in range(threads)]
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def __call__(self) -> None:
        if self.pool is None:
            np.copyto(self.targets[0], self.sources[0])
            return
        list(self.pool.map(np.copyto, self.targets, self.sources))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
