"""Timing and the same-run baselines every benchmark is measured against."""

from __future__ import annotations

import ctypes
import functools
import statistics
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import peers

MIN_REPEATS = 3


@dataclass(frozen=True)
class Timing:
    median: float  # seconds
    spread: float  # (max - min) / median over the repeats
    repeats: int


def measure(
    *fns: Callable[[], object], repeats: int, warmup: int = 1, budget_s: float | None = None
) -> list[Timing]:
    """Times each of ``fns``, taking turns within every repeat so that all of them see the same
    (shared, noisy) machine: the ratios between them are what the benchmarks report. With
    ``budget_s``, ``repeats`` is cut to the turns that fit in it by the warm-up's times (at least
    ``MIN_REPEATS``), so that large cases take few repeats and small ones many; where not even
    those fit, the warm-up counts as the first repeat (the median of three shrugs off one slow
    first run)."""
    times: list[list[float]] = [[] for _ in fns]

    def turn() -> float:
        for fn, samples in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return sum(samples[-1] for samples in times)

    warm = [turn() for _ in range(warmup)]
    fitting = budget_s / max(statistics.mean(warm), 1e-9) if budget_s is not None and warmup else repeats
    repeats = min(repeats, max(MIN_REPEATS, int(fitting)))
    if fitting >= MIN_REPEATS or repeats < MIN_REPEATS:
        for samples in times:
            samples.clear()
    while len(times[0]) < repeats:
        turn()
    return [Timing(statistics.median(t), (max(t) - min(t)) / statistics.median(t), len(t)) for t in times]


@functools.cache
def _streaming_threshold() -> int:
    """Bytes from which glibc's memmove uses streaming stores: by default 3/4 of the L3 size as
    glibc sees it (240 MiB where that reads 320 MiB); 0 when unknown."""
    try:
        l3 = subprocess.run(["getconf", "LEVEL3_CACHE_SIZE"], capture_output=True, text=True).stdout
        return max(int(l3), 0) * 3 // 4
    except (OSError, ValueError):
        return 0


_STREAMING_PAIRS: list[tuple[np.ndarray, np.ndarray]] = []  # kept for the whole run, one per thread


def _streaming_pairs(nbytes: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` (source, target) pairs of ``nbytes`` each (``nbytes`` is the same every call)."""
    while len(_STREAMING_PAIRS) < count:
        _STREAMING_PAIRS.append((np.ones(nbytes, np.uint8), np.zeros(nbytes, np.uint8)))
    return _STREAMING_PAIRS[:count]


def _numpy_copy(pair: tuple[np.ndarray, np.ndarray]) -> None:
    np.copyto(pair[1], pair[0])


def _memmove(pair: tuple[np.ndarray, np.ndarray]) -> None:
    ctypes.memmove(pair[1].ctypes.data, pair[0].ctypes.data, pair[0].nbytes)


def _copy_all(pairs: list, copy: Callable, pool: ThreadPoolExecutor | None) -> None:
    if pool is None:
        for pair in pairs:
            copy(pair)
    else:
        list(pool.map(copy, pairs))


class CopyBaseline:
    """Plain memory copies on up to ``threads`` threads, moving ``nbytes`` (half read, half
    written): the fastest per byte, timed in the same turns as the kernel, is the bandwidth roof
    the memory-bound kernels are held to. ``candidates`` lists them with the bytes each call moves:
    NumPy's loop and libc's memmove, on the calling thread alone (faster for small sizes, where
    handing work to a Python thread pool costs more than the copy) or in pieces handed to the
    threads as they come free, like ONNX Runtime's pool does (both copies release the GIL, so the
    threads copy in parallel). memmove streams its stores (no read of the target first) only past
    a threshold, as kernels may at any size, so up to that size one more candidate copies a block
    of the threshold's size on each thread: without it a streaming kernel beats the roof by up to
    half again."""

    STREAMING_FROM = 8 << 20  # bytes per thread: below this, caches decide and streaming cannot win
    PIECES = 4  # per thread

    def __init__(self, nbytes: int, threads: int):
        size = max(nbytes // 2, 1)
        source, target = np.ones(size, np.uint8), np.zeros(size, np.uint8)
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        ways: list[tuple[list[tuple[np.ndarray, np.ndarray]], ThreadPoolExecutor | None]]
        ways = [([(source, target)], None)]
        if self.pool is not None:
            parts = threads * self.PIECES
            ways.append(
                (
                    list(zip(np.array_split(source, parts), np.array_split(target, parts), strict=True)),
                    self.pool,
                )
            )
        self.candidates = [
            (functools.partial(_copy_all, pairs, copy, pool), 2 * size)
            for copy in (_numpy_copy, _memmove)
            for pairs, pool in ways
        ]
        threshold = _streaming_threshold()
        if self.STREAMING_FROM <= size // threads < threshold <= 1 << 30:
            block = threshold + (1 << 20)
            pairs = _streaming_pairs(block, threads)
            self.candidates.append(
                (functools.partial(_copy_all, pairs, _memmove, self.pool), 2 * block * threads)
            )

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


class GemmBaseline:
    """NumPy's float32 matrix product on ``threads`` BLAS threads: the rate GEMM-shaped kernels are
    held to (``sgemm``). For bfloat16 rows, where the CPU's bfloat16 dot products (AVX-512 BF16)
    double it, PyTorch's bfloat16 matrix product of the same size is a second candidate and the
    faster one is the roof (``bf16 gemm``). Without threadpoolctl, NumPy's BLAS keeps its own thread
    count (the suite says so, once)."""

    SIZE = 1024

    def __init__(self, threads: int, dtype: str):
        rng = np.random.default_rng(0)
        self.a = rng.standard_normal((self.SIZE, self.SIZE), np.float32)
        self.b = rng.standard_normal((self.SIZE, self.SIZE), np.float32)
        flops = 2.0 * self.SIZE**3
        self.candidates: list[tuple[Callable[[], object], float]] = [(self, flops)]  # calls, flops each
        self.name = "sgemm"
        if dtype == "bfloat16" and peers.importable("torch"):
            torch = peers.torch_module()
            torch.set_num_threads(threads)
            a, b = (torch.from_numpy(m).to(torch.bfloat16) for m in (self.a, self.b))
            self.candidates.append((lambda: torch.matmul(a, b), flops))
            self.name = "bf16 gemm"
        self._limits = None
        if not peers.importable("threadpoolctl"):
            return
        from threadpoolctl import ThreadpoolController

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
