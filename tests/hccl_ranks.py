"""The ranks of tests/test_aclnn_emulator_hccl.py: each a process of its own (multiprocessing's
spawn) with one emulated device, driving libascendcl.so and libhccl.so through ctypes, and the
pool that drives them from the test through pipes. A rank imports NumPy and ctypes only, so it
starts fast; arrays travel as unsigned integers of their element's width with the element type's
name beside them (bfloat16 without ml_dtypes here)."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import threading
import time
import traceback
from pathlib import Path

import numpy as np

# HcclDataType by NumPy's name of the element type.
HCCL_TYPES = {
    name: code
    for code, name in enumerate(
        "int8 int16 int32 float16 float32 int64 uint64 uint8 uint16 uint32 float64 bfloat16".split()
    )
}
FP32 = HCCL_TYPES["float32"]
SUM, PROD, MAX, MIN = range(4)
HOST_TO_DEVICE, DEVICE_TO_HOST = 1, 2
ROOT_INFO_BYTES = 4108
ANSWER_SECONDS = 30  # a rank slower than this is stuck: the test fails and the ranks are killed
EXITED = "exited"  # what a rank whose process ended answers
P = ctypes.c_void_p


# ---- In the rank processes ------------------------------------------------------------------


class Rank:
    """One rank's process: the emulated runtime and HCCL through ctypes."""

    def __init__(self, lib64: str, index: int):
        self.index, self.n = index, 0
        self.acl = acl = ctypes.CDLL(os.path.join(lib64, "libascendcl.so"))
        self.hccl = hccl = ctypes.CDLL(os.path.join(lib64, "libhccl.so"))
        u32, u64 = ctypes.c_uint32, ctypes.c_uint64
        copy = [P, ctypes.c_size_t, P, ctypes.c_size_t, ctypes.c_int]
        for lib, name, *args in [
            (acl, "aclrtSetDevice", ctypes.c_int32),
            (acl, "aclrtGetDeviceCount", ctypes.POINTER(u32)),
            (acl, "aclrtMalloc", ctypes.POINTER(P), ctypes.c_size_t, ctypes.c_int),
            (acl, "aclrtFree", P),
            (acl, "aclrtMemcpy", *copy),
            (acl, "aclrtCreateStream", ctypes.POINTER(P)),
            (acl, "aclrtDestroyStream", P),
            (acl, "aclrtSynchronizeStream", P),
            (hccl, "HcclGetRootInfo", ctypes.c_char_p),
            (hccl, "HcclCommInitRootInfo", u32, ctypes.c_char_p, u32, ctypes.POINTER(P)),
            (hccl, "HcclCommDestroy", P),
            (hccl, "HcclGetRankSize", P, ctypes.POINTER(u32)),
            (hccl, "HcclGetRankId", P, ctypes.POINTER(u32)),
            (hccl, "HcclAllReduce", P, P, u64, ctypes.c_int, ctypes.c_int, P, P),
            (hccl, "HcclBroadcast", P, u64, ctypes.c_int, u32, P, P),
            (hccl, "HcclReduceScatter", P, P, u64, ctypes.c_int, ctypes.c_int, P, P),
            (hccl, "HcclAllGather", P, P, u64, ctypes.c_int, P, P),
            (hccl, "HcclBarrier", P, P),
        ]:
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = ctypes.c_int, list(args)
        acl.aclGetRecentErrMsg.restype = ctypes.c_char_p
        for name in ("aclemu_calls", "aclemu_collective_bytes"):
            getattr(acl, name).restype = ctypes.c_int64
            getattr(acl, name).argtypes = [ctypes.c_char_p]
        acl.aclemu_fail.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p]
        self.allocated: list[P] = []

    def message(self) -> str:
        text = self.acl.aclGetRecentErrMsg()
        return text.decode() if text else ""

    def ok(self, code: int, call: str) -> None:
        if code != 0:
            raise AssertionError(f"rank {self.index}: {call} failed with {code}: {self.message()}")

    def answer(self, code: int) -> tuple[int, str]:
        """A call's code and, when it failed, its message."""
        return code, self.message() if code else ""

    def set_device(self, device: int | None = None) -> None:
        self.ok(self.acl.aclrtSetDevice(self.index if device is None else device), "aclrtSetDevice")

    def init(self, root: bytes, n: int, rank: int | None = None) -> tuple[int, str, P]:
        comm = P()
        code = self.hccl.HcclCommInitRootInfo(
            n, root, self.index if rank is None else rank, ctypes.byref(comm)
        )
        self.n = n
        return *self.answer(code), comm

    def comm(self, root: bytes, n: int) -> P:
        code, message, comm = self.init(root, n)
        self.ok(code, f"HcclCommInitRootInfo ({message})")
        return comm

    def stream(self) -> P:
        stream = P()
        self.ok(self.acl.aclrtCreateStream(ctypes.byref(stream)), "aclrtCreateStream")
        return stream

    def malloc(self, nbytes: int) -> P:
        if nbytes == 0:
            return P()  # aclrtMalloc refuses 0 bytes; an empty collective takes NULL
        pointer = P()
        self.ok(self.acl.aclrtMalloc(ctypes.byref(pointer), nbytes, 0), "aclrtMalloc")
        self.allocated.append(pointer)
        return pointer

    def put(self, pointer: P, array: np.ndarray) -> None:
        if array.nbytes:
            code = self.acl.aclrtMemcpy(
                pointer, array.nbytes, array.ctypes.data, array.nbytes, HOST_TO_DEVICE
            )
            self.ok(code, "aclrtMemcpy")

    def upload(self, array: np.ndarray) -> P:
        pointer = self.malloc(array.nbytes)
        self.put(pointer, array)
        return pointer

    def download(self, pointer: P, dtype: np.dtype, count: int) -> np.ndarray:
        out = np.empty(count, dtype)
        if count:
            code = self.acl.aclrtMemcpy(out.ctypes.data, out.nbytes, pointer, out.nbytes, DEVICE_TO_HOST)
            self.ok(code, "aclrtMemcpy")
        return out

    def finish(self, comm: P, stream: P) -> None:
        self.ok(self.acl.aclrtDestroyStream(stream), "aclrtDestroyStream")
        self.ok(self.hccl.HcclCommDestroy(comm), "HcclCommDestroy")
        for pointer in self.allocated:
            self.ok(self.acl.aclrtFree(pointer), "aclrtFree")
        self.allocated.clear()


def serve(conn, lib64: str, index: int) -> None:
    """A rank process's loop: runs the functions of this module the test names, answers with their
    results; the environment a function changes is restored after it."""
    os.environ.update(
        ASCEND_HOME_PATH=str(Path(lib64).parent),
        ACLEMU_DEVICE_COUNT="4",
        HCCL_CONNECT_TIMEOUT="20",
        HCCL_EXEC_TIMEOUT="20",
    )
    rank = Rank(lib64, index)
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        name, args = message
        environment = dict(os.environ)
        rank.acl.aclemu_reset()
        try:
            answer = ("ok", globals()[name](rank, *args))
        except BaseException:
            answer = ("raised", traceback.format_exc())
        os.environ.clear()
        os.environ.update(environment)
        conn.send(answer)


def make_root(r: Rank) -> bytes:
    info = ctypes.create_string_buffer(ROOT_INFO_BYTES)
    r.ok(r.hccl.HcclGetRootInfo(info), "HcclGetRootInfo")
    return info.raw


def queue(r: Rank, comm: P, stream: P, step: dict) -> tuple[P, np.dtype, int]:
    """Queues one collective of a program; returns where its result will be."""
    call, x, h = step["call"], step.get("x"), r.hccl
    if call == "barrier":
        r.ok(h.HcclBarrier(comm, stream), "HcclBarrier")
        return P(), np.dtype(np.uint8), 0
    dtype, count, in_place = HCCL_TYPES[step["dtype"]], x.size, step.get("in_place", False)
    if call == "all_reduce":
        send = r.upload(x)
        recv = send if in_place else r.malloc(x.nbytes)
        r.ok(h.HcclAllReduce(send, recv, count, dtype, step["op"], comm, stream), "HcclAllReduce")
        return recv, x.dtype, count
    if call == "reduce_scatter":  # x holds the n blocks; in place: recvBuf == sendBuf
        block = count // r.n
        send = r.upload(x)
        recv = send if in_place else r.malloc(block * x.itemsize)
        r.ok(h.HcclReduceScatter(send, recv, block, dtype, step["op"], comm, stream), "HcclReduceScatter")
        return recv, x.dtype, block
    if call == "all_gather":  # in place: sendBuf is this rank's block of recvBuf, as torch passes it
        recv = r.malloc(r.n * x.nbytes)
        send = P((recv.value or 0) + r.index * x.nbytes) if in_place else r.upload(x)
        if in_place:
            r.put(send, x)
        r.ok(h.HcclAllGather(send, recv, count, dtype, comm, stream), "HcclAllGather")
        return recv, x.dtype, r.n * count
    assert call == "broadcast", call
    buf = r.upload(x)
    r.ok(h.HcclBroadcast(buf, count, dtype, step["root"], comm, stream), "HcclBroadcast")
    return buf, x.dtype, count


def run_program(r: Rank, root: bytes, n: int, steps: list[dict]) -> list[np.ndarray]:
    """Queues every step on one stream, waits once, and returns each step's result."""
    r.set_device()
    comm, stream = r.comm(root, n), r.stream()
    where = [queue(r, comm, stream, step) for step in steps]
    r.ok(r.acl.aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")
    results = [r.download(*w) for w in where]
    r.finish(comm, stream)
    return results


def init_on(r: Rank, root: bytes, n: int, rank: int, device: int, env: dict) -> tuple[int, str]:
    os.environ.update(env)
    r.set_device(device)
    code, message, comm = r.init(root, n, rank)
    if code == 0:
        r.ok(r.hccl.HcclCommDestroy(comm), "HcclCommDestroy")
    return code, message


def die_after_init(r: Rank, root: bytes, n: int) -> None:
    r.set_device()
    r.comm(root, n)
    os._exit(0)  # as a killed rank: no destroy, no goodbye


def all_reduce_after_a_peer_died(r: Rank, root: bytes, n: int) -> dict:
    os.environ["HCCL_EXEC_TIMEOUT"] = "60"  # far past what the test waits: the death must be seen
    r.set_device()
    comm, stream = r.comm(root, n), r.stream()
    x = r.upload(np.ones(16, np.float32))
    r.ok(r.hccl.HcclAllReduce(x, x, 16, FP32, SUM, comm, stream), "HcclAllReduce")
    start = time.monotonic()
    waited = r.answer(r.acl.aclrtSynchronizeStream(stream))
    seconds = time.monotonic() - start
    again = r.answer(r.hccl.HcclAllReduce(x, x, 16, FP32, SUM, comm, stream))
    r.finish(comm, stream)
    return {"waited": waited, "seconds": seconds, "again": again}


def mismatched_counts(r: Rank, root: bytes, n: int, count: int) -> dict:
    r.set_device()
    comm, stream = r.comm(root, n), r.stream()
    x = r.upload(np.ones(count, np.float32))
    r.ok(r.hccl.HcclAllReduce(x, x, count, FP32, SUM, comm, stream), "HcclAllReduce")
    waited = r.answer(r.acl.aclrtSynchronizeStream(stream))
    again = r.answer(r.hccl.HcclAllReduce(x, x, count, FP32, SUM, comm, stream))
    r.finish(comm, stream)
    return {"waited": waited, "again": again}


def device_count(r: Rank) -> list:
    """(ACLEMU_DEVICE_COUNT, aclrtGetDeviceCount's answer, the count, aclrtSetDevice(1)'s answer)."""
    count, seen = ctypes.c_uint32(), []
    for value in (None, "2", "abc", "65"):
        if value is None:
            os.environ.pop("ACLEMU_DEVICE_COUNT", None)
        else:
            os.environ["ACLEMU_DEVICE_COUNT"] = value
        answer = r.answer(r.acl.aclrtGetDeviceCount(ctypes.byref(count)))
        seen.append(
            (value, answer, count.value if answer[0] == 0 else None, r.answer(r.acl.aclrtSetDevice(1)))
        )
    return seen


def counted(r: Rank, root: bytes, n: int) -> dict:
    r.set_device()
    comm, stream = r.comm(root, n), r.stream()
    f16, i32, f64 = HCCL_TYPES["float16"], HCCL_TYPES["int32"], HCCL_TYPES["float64"]
    h = r.hccl
    a, b = r.malloc(400), r.malloc(400)
    refused = r.answer(h.HcclAllReduce(a, b, 100, 12, SUM, comm, stream))
    r.ok(h.HcclAllReduce(a, b, 100, FP32, SUM, comm, stream), "HcclAllReduce")
    r.ok(h.HcclReduceScatter(a, b, 10, f16, MAX, comm, stream), "HcclReduceScatter")
    r.ok(h.HcclAllGather(a, b, 7, i32, comm, stream), "HcclAllGather")
    r.ok(h.HcclBroadcast(a, 5, f64, 1, comm, stream), "HcclBroadcast")
    r.ok(h.HcclBarrier(comm, stream), "HcclBarrier")
    r.ok(r.acl.aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")
    symbols = ["HcclAllReduce", "HcclReduceScatter", "HcclAllGather", "HcclBroadcast", "HcclBarrier"]
    calls = {s: r.acl.aclemu_calls(s.encode()) for s in symbols}
    sent = {s: r.acl.aclemu_collective_bytes(s.encode()) for s in [*symbols, "aclrtMemcpy"]}
    r.finish(comm, stream)
    r.acl.aclemu_reset()
    after_reset = r.acl.aclemu_collective_bytes(b"HcclAllReduce")
    return {"refused": refused, "calls": calls, "bytes": sent, "after_reset": after_reset}


def refusals(r: Rank, root: bytes) -> dict:
    """One rank alone (nRanks 1): every argument check, answered (code, message)."""
    h, seen = r.hccl, {}
    # A fresh thread has no device set.
    worker = threading.Thread(target=lambda: seen.update(no_device=r.init(root, 1)[:2]))
    worker.start()
    worker.join(ANSWER_SECONDS)
    r.set_device()
    seen["n_ranks_0"] = r.init(make_root(r), 0, 0)[:2]
    seen["rank_past_n"] = r.init(make_root(r), 2, 2)[:2]
    seen["foreign_root"] = r.init(b"/dev/shm/something".ljust(ROOT_INFO_BYTES, b"\0"), 1, 0)[:2]
    seen["null_comm"] = r.answer(h.HcclCommInitRootInfo(1, make_root(r), 0, None))
    os.environ["HCCL_CONNECT_TIMEOUT"] = "soon"
    seen["bad_timeout"] = r.init(make_root(r), 1, 0)[:2]
    del os.environ["HCCL_CONNECT_TIMEOUT"]
    comm, stream = r.comm(make_root(r), 1), r.stream()
    a, b = r.malloc(64), r.malloc(64)
    size, rank = ctypes.c_uint32(), ctypes.c_uint32()
    r.ok(
        h.HcclGetRankSize(comm, ctypes.byref(size)) or h.HcclGetRankId(comm, ctypes.byref(rank)),
        "HcclGetRank*",
    )
    seen["size_and_rank"] = (size.value, rank.value)
    seen["null_send"] = r.answer(h.HcclAllReduce(None, b, 4, FP32, SUM, comm, stream))
    seen["bad_dtype"] = r.answer(h.HcclAllReduce(a, b, 4, 12, SUM, comm, stream))
    seen["bad_op"] = r.answer(h.HcclAllReduce(a, b, 4, FP32, 4, comm, stream))
    seen["root_past_n"] = r.answer(h.HcclBroadcast(a, 4, FP32, 1, comm, stream))
    seen["partial_overlap"] = r.answer(h.HcclAllReduce(a, P(a.value + 4), 4, FP32, SUM, comm, stream))
    seen["dead_stream"] = r.answer(h.HcclAllReduce(a, b, 4, FP32, SUM, comm, P(0x1234)))
    seen["null_comm_call"] = r.answer(h.HcclAllReduce(a, b, 4, FP32, SUM, None, stream))
    seen["foreign_comm"] = r.answer(h.HcclAllReduce(a, b, 4, FP32, SUM, P(0x1234), stream))
    seen["empty_with_null"] = r.answer(h.HcclAllReduce(None, None, 0, FP32, SUM, comm, stream))
    r.acl.aclemu_fail(b"HcclAllReduce", 7, b"HcclAllReduce: injected")
    seen["injected"] = r.answer(h.HcclAllReduce(a, b, 4, FP32, SUM, comm, stream))
    seen["injected_bytes"] = r.acl.aclemu_collective_bytes(b"HcclAllReduce")
    r.acl.aclemu_fail(b"HcclAllReduce", 0, None)
    r.ok(h.HcclAllReduce(a, b, 4, FP32, SUM, comm, stream), "HcclAllReduce")
    host = np.zeros(4, np.float32)
    seen["read_before_wait"] = r.answer(r.acl.aclrtMemcpy(host.ctypes.data, 16, b, 16, DEVICE_TO_HOST))
    seen["destroy_queued"] = r.answer(h.HcclCommDestroy(comm))
    r.ok(r.acl.aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")
    r.finish(comm, stream)
    seen["destroy_twice"] = r.answer(h.HcclCommDestroy(comm))
    return seen


# ---- In the test process --------------------------------------------------------------------


def _wire(array: np.ndarray) -> np.ndarray:
    """An array as it travels to a rank: unsigned integers of its element's width."""
    return array.view(f"u{array.itemsize}")


class Ranks:
    """Rank processes for a module's tests; rank i sets device i unless a test says otherwise."""

    def __init__(self, lib64: str):
        self.lib64 = lib64
        self.context = multiprocessing.get_context("spawn")
        self.workers: list[tuple] = []  # (process, our end of its pipe)

    def _start(self, index: int) -> tuple:
        ours, theirs = self.context.Pipe()
        process = self.context.Process(target=serve, args=(theirs, self.lib64, index), daemon=True)
        process.start()
        theirs.close()
        return process, ours

    def _ensure(self, n: int) -> None:
        for i, (process, conn) in enumerate(self.workers):
            if not process.is_alive():
                process.join(ANSWER_SECONDS)
                conn.close()
                self.workers[i] = self._start(i)
        self.workers += [self._start(i) for i in range(len(self.workers), n)]

    def each(self, calls: list[tuple]) -> list:
        """Runs fn(rank, *args) of calls[i] = (fn, args) on rank i, all at once; their results in rank
        order (EXITED for a rank whose process ended). A rank that raised or did not answer fails
        the test; one that did not answer has all ranks killed first."""
        self._ensure(len(calls))
        workers = self.workers[: len(calls)]
        for (_, conn), (fn, args) in zip(workers, calls, strict=True):
            conn.send((fn.__name__, args))
        deadline, answers = time.monotonic() + ANSWER_SECONDS, []
        for i, ((_, conn), (fn, _)) in enumerate(zip(workers, calls, strict=True)):
            if not conn.poll(max(0.0, deadline - time.monotonic())):
                self.close()
                raise AssertionError(
                    f"rank {i} did not answer {fn.__name__} in {ANSWER_SECONDS} s: ranks killed"
                )
            try:
                status, value = conn.recv()
            except EOFError:
                status, value = "ok", EXITED
            if status == "raised":
                raise AssertionError(f"rank {i} raised in {fn.__name__}:\n{value}")
            answers.append(value)
        return answers

    def run(self, fn, per_rank: list[tuple]) -> list:
        return self.each([(fn, args) for args in per_rank])

    def root(self) -> bytes:
        """Rank 0's HcclGetRootInfo, which the test hands to every rank."""
        return self.run(make_root, [()])[0]

    def program(self, steps: list[list[dict]]) -> list[list[np.ndarray]]:
        """Rank r runs steps[r] (dicts with "call", "x", "op", "root", "in_place"): its collectives
        queued on one stream, one wait; each step's result in x's element type."""
        root, n = self.root(), len(steps)
        wired = [
            [{**s, "x": _wire(s["x"]), "dtype": s["x"].dtype.name} if "x" in s else s for s in ss]
            for ss in steps
        ]
        results = self.run(run_program, [(root, n, s) for s in wired])
        return [
            [out.view(s["x"].dtype) if "x" in s else out for out, s in zip(outs, ss, strict=True)]
            for outs, ss in zip(results, steps, strict=True)
        ]

    def close(self) -> None:
        for _, conn in self.workers:
            try:
                conn.send(None)
            except OSError:
                pass
        for process, conn in self.workers:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)
            conn.close()
        self.workers = []
