"""Timing and the same-run baselines every benchmark is measured against."""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

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
    ``threads`` threads like the kernel's work: the bandwidth roof the memory-bound kernels are
    held to. Two copies compete, NumPy's loop and libc's memmove (whose large-size path uses
    streaming stores), and the faster on this machine, size and thread count is the roof. Both
    release the GIL, so the threads copy in parallel."""

    def __init__(self, nbytes: int, threads: int):
        chunk = max(nbytes // 2 // threads, 1)
        self.sources = [np.ones(chunk, np.uint8) for _ in range(threads)]
        self.targets = [np.zeros(chunk, np.uint8) for _ in range(threads)]
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        numpy_time, memmove_time = measure(
            lambda: self._on_all_threads(self._numpy_copy),
            lambda: self._on_all_threads(self._memmove),
            repeats=3,
        )
        self._copy = self._numpy_copy if numpy_time.median <= memmove_time.median else self._memmove

    def _numpy_copy(self, i: int) -> None:
        np.copyto(self.targets[i], self.sources[i])

    def _memmove(self, i: int) -> None:
        ctypes.memmove(self.targets[i].ctypes.data, self.sources[i].ctypes.data, self.sources[i].nbytes)

    def _on_all_threads(self, copy: Callable[[int], None]) -> None:
        if self.pool is None:
            copy(0)
        else:
            list(self.pool.map(copy, range(len(self.sources))))

    def __call__(self) -> None:
        self._on_all_threads(self._copy)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


class SgemmBaseline:
    """NumPy's float32 matrix product on ``threads`` BLAS threads: the rate GEMM-shaped kernels are
    held to. Without threadpoolctl, NumPy's BLAS keeps its own thread count (the run says so)."""

    SIZE = 1024

    def __init__(self, threads: int):
        rng = np.random.default_rng(0)
        self.a = rng.standard_normal((self.SIZE, self.SIZE), np.float32)
        self.b = rng.standard_normal((self.SIZE, self.SIZE), np.float32)
        self.flops = 2.0 * self.SIZE**3
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            print("note: threadpoolctl is not installed; NumPy's sgemm runs on its default threads")
            self._limits = None
            return
        # Only NumPy's own BLAS: the kernels' OpenBLAS (same prefix, another file) stays as it is.
        controller = ThreadpoolController()
        numpy_dir = str(Path(np.__file__).parent.parent)
        numpy_blas = [
            c.filepath for c in controller.lib_controllers if c.filepath.startswith(numpy_dir + "/numpy")
        ]
        self._limits = controller.select(filepath=numpy_blas).limit(limits=threads)

    def __call__(self) -> None:
        np.matmul(self.a, self.b)

    def close(self) -> None:
        if self._limits is not None:
            self._limits.restore_original_limits()
