"""Memory checks: the peak of what Python and NumPy hold during a call (``traced_peak``), and a
leak check that a real leak fails and a shared machine's noise does not.

A leak grows memory with every call, so it shows in every block of calls; what happens once (an
arena or a thread's buffers growing, the kernel collapsing heap pages into a 2 MiB huge page)
shows in one block. A plain before/after RSS bound fails on the second kind (CI once saw +7 MiB
over 20,000 calls that leaked nothing), and misses a leak into memory that is resident but free.
So the check bounds three things instead:

- the bytes glibc's malloc has handed out and not had back (native code), and the blocks Python's
  allocator has handed out (objects kept alive), over all blocks: exact, and blind to
  fragmentation and to how the kernel maps pages;
- the median growth of resident memory per block, after ``malloc_trim`` returns freed heap pages:
  catches what bypasses both allocators (pages mapped directly) without tripping on a one-off step.
  It is coarser: malloc's heap rises and falls by a few hundred KiB as ORT's failure path frees
  its buffers in bursts, and resident memory follows.
"""

import ctypes
import gc
import itertools
import os
import statistics
import sys
import tracemalloc

MiB = 1 << 20
# Above the noise seen here (malloc's in-use bytes move by up to ~0.5 MiB between checkpoints);
# over 20,000 calls a leak of 128 bytes per call through malloc exceeds the bound, one of 512 bytes
# per call in pages mapped directly exceeds the resident one (tests/test_resources.py shows both).
LEAK_PER_CALL = 64
HEAP_NOISE = MiB
RESIDENT_LEAK_PER_CALL = 256
# Python's free lists and caches settle within a few hundred blocks; one object kept per call is
# 10,000 or more.
PYTHON_BLOCKS_NOISE = 1000

_libc = ctypes.CDLL(None)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            *("arena", "ordblks", "smblks", "hblks", "hblkhd"),
            *("usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"),
        )
    ]


_libc.mallinfo2.restype = _MallInfo2


def heap_in_use() -> int:
    """Bytes malloc has handed out (all arenas, mmapped chunks included) and not had back."""
    info = _libc.mallinfo2()
    return info.uordblks + info.hblkhd


def resident() -> int:
    _libc.malloc_trim(0)
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def snapshot() -> tuple[int, int, int]:
    """(malloc's bytes in use, Python's blocks in use, resident bytes), once the garbage is
    collected (exceptions and their tracebacks form cycles)."""
    gc.collect()
    return heap_in_use(), sys.getallocatedblocks(), resident()


def assert_memory_flat(run_block, calls_per_block: int, blocks: int = 10) -> None:
    """Runs ``run_block`` (which makes ``calls_per_block`` calls) once to settle, then ``blocks``
    times, and fails if memory grows with the calls."""
    run_block()
    snapshots = [snapshot()]
    for _ in range(blocks):
        run_block()
        snapshots.append(snapshot())
    heap, python_blocks, rss = zip(*snapshots, strict=True)
    calls = calls_per_block * blocks
    heap_growth = heap[-1] - heap[0]
    assert heap_growth < HEAP_NOISE + LEAK_PER_CALL * calls, (
        f"malloc's in-use bytes grew {heap_growth / MiB:.2f} MiB over {calls} calls: {heap}"
    )
    kept = python_blocks[-1] - python_blocks[0]
    assert kept < PYTHON_BLOCKS_NOISE, f"Python kept {kept} more blocks after {calls} calls: {python_blocks}"
    steps = [after - before for before, after in itertools.pairwise(rss)]
    assert statistics.median(steps) < RESIDENT_LEAK_PER_CALL * calls_per_block, (
        f"resident memory grew in most blocks of {calls_per_block} calls (bytes per block: {steps})"
    )


def traced_peak(load) -> tuple[int, object]:
    """The peak of the host memory Python and NumPy allocate while ``load`` runs (tracemalloc
    sees NumPy's buffers, not ONNX Runtime's or a device's), and what it returned."""
    tracemalloc.start()
    try:
        result = load()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()
