"""Many processes on ``torch.distributed``, launched by ``torchrun``: we build no communication of
our own. Gradients are averaged as torch's DDP averages them: in buckets of at most
``BUCKET_MB`` (DDP's ``bucket_cap_mb``), cut from the gradient buffers (``buffers.Buffers``) in
one fixed order so that every run sums alike, handed to the collectives as ``torch.from_numpy``
views of the very memory ONNX Runtime wrote (no copy), all launched at once so that averaging one
bucket overlaps the next one's transfer. ONNX Runtime runs the backward as one call, so the
transfer cannot start before the last gradient exists, as DDP's does during its backward.

A collective that fails (a rank killed: gloo sees its connections close at once; a rank stalled:
the process group's timeout) raises ``RankLostError`` naming the ranks that did not answer a roll
call on the rendezvous store within ``ROLL_CALL_SECONDS``, never a hang."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from datetime import timedelta

import numpy as np

BUCKET_MB = 25
ROLL_CALL_SECONDS = 10.0


class RankLostError(RuntimeError):
    """A collective failed because a rank is gone (killed, or stalled past the timeout)."""


class RankMismatchError(ValueError):
    """Ranks that would train different things: another model, setting or package version."""


def _dist():
    import torch.distributed as dist

    return dist


def current(process_group=None) -> Ranks | None:
    """The ranks of ``process_group``, else of torch.distributed's default group once it is
    initialized (as DDP takes it); None in a single process (or a group of one)."""
    if process_group is None:
        dist = sys.modules.get("torch.distributed")  # not imported: nothing can be initialized
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
    ranks = Ranks(process_group)
    return ranks if ranks.size > 1 else None


class Ranks:
    """The processes of one group, and the collectives the training API runs over them."""

    def __init__(self, group=None, bucket_mb: float = BUCKET_MB):
        dist = _dist()
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.bucket_bytes = int(bucket_mb * 2**20)
        self.seconds = 0.0  # spent in collectives of gradients and parameters, for the bench

    def _run(self, what: str, launch):
        """``launch()``'s works waited for, a failure turned into ``RankLostError``."""
        start = time.perf_counter()
        try:
            works = launch()
            for work, then in works:
                work.wait()
                if then is not None:
                    then()
        except RuntimeError as error:  # DistBackendError, gloo's closed connections, timeouts
            raise self.lost(what, error) from None
        finally:
            self.seconds += time.perf_counter() - start

    def buckets(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Slices of ``arrays`` of at most ``bucket_bytes``, in the arrays' order."""
        out = []
        for array in arrays:
            step = max(1, self.bucket_bytes // array.itemsize)
            out += [array[i : i + step] for i in range(0, array.size, step)]
        return out

    def average(self, arrays: Sequence[np.ndarray], found_inf: bool | None = None) -> bool:
        """Every rank's ``arrays`` (1-D, float) replaced by their mean over the ranks, in place;
        with ``found_inf`` given, whether any rank found an inf or NaN (all-reduced MAX)."""
        import torch

        dist = _dist()
        flag = torch.tensor([float(bool(found_inf))])

        def launch():
            works = []
            if found_inf is not None:
                op = dist.ReduceOp.MAX
                works.append((dist.all_reduce(flag, op, group=self.group, async_op=True), None))
            for bucket in self.buckets(arrays):
                tensor = _tensor(bucket)
                works.append(
                    (
                        dist.all_reduce(tensor, group=self.group, async_op=True),
                        lambda t=tensor: t.mul_(1.0 / self.size),
                    )
                )
            return works

        self._run("the gradients' all-reduce", launch)
        return bool(flag.item())

    def mean(self, values: Sequence[float], what: str) -> list[float]:
        """The mean over ranks of a few float64 scalars (a loss, a flag)."""
        import torch

        dist = _dist()
        tensor = torch.tensor(list(values), dtype=torch.float64)
        self._run(what, lambda: [(dist.all_reduce(tensor, group=self.group, async_op=True), None)])
        return [float(v) / self.size for v in tensor]

    def broadcast(self, arrays: Sequence[np.ndarray], sources: Sequence[int], what: str) -> None:
        """Each of ``arrays`` overwritten, on every rank, by its value on its source rank."""
        dist = _dist()
        self._run(
            what,
            lambda: [
                (dist.broadcast(_tensor(a), self._global(src), group=self.group, async_op=True), None)
                for a, src in zip(arrays, sources, strict=True)
                if a.size
            ],
        )

    def send_to(self, array: np.ndarray, rank: int, what: str) -> None:
        dist = _dist()
        self._run(what, lambda: [(dist.isend(_tensor(array), self._global(rank), group=self.group), None)])

    def receive_from(self, array: np.ndarray, rank: int, what: str) -> None:
        dist = _dist()
        self._run(what, lambda: [(dist.irecv(_tensor(array), self._global(rank), group=self.group), None)])

    def objects(self, value, what: str) -> list:
        """Every rank's ``value`` (picklable), in rank order."""
        dist = _dist()
        gathered: list = [None] * self.size
        try:
            dist.all_gather_object(gathered, value, group=self.group)
        except RuntimeError as error:
            raise self.lost(what, error) from None
        return gathered

    def from_rank0(self, value, what: str):
        """Rank 0's ``value`` (picklable), on every rank."""
        dist = _dist()
        box = [value]
        try:
            dist.broadcast_object_list(box, self._global(0), group=self.group)
        except RuntimeError as error:
            raise self.lost(what, error) from None
        return box[0]

    def agree(self, facts: dict[str, str], error: str | None = None) -> None:
        """Refuses, on every rank, a start where a rank failed its own checks (``error``) or
        where any rank's ``facts`` (setting -> value) differ from rank 0's: a
        ``RankMismatchError`` naming the rank, the setting and both values."""
        gathered = self.objects((facts, error), "the ranks' settings check")
        for rank, (_, failed) in enumerate(gathered):
            if failed:
                raise RankMismatchError(f"rank {rank} of {self.size} cannot start: {failed}")
        reference = gathered[0][0]
        for rank, (theirs, _) in enumerate(gathered[1:], start=1):
            for name in sorted(set(reference) | set(theirs)):
                if reference.get(name) != theirs.get(name):
                    raise RankMismatchError(
                        f"ranks disagree on {name}: rank 0 has {reference.get(name)}, rank {rank} has "
                        f"{theirs.get(name)}; every rank must run the same model and settings"
                    )

    def _global(self, rank: int) -> int:
        return rank if self.group is None else _dist().get_global_rank(self.group, rank)

    def lost(self, what: str, error: BaseException) -> RankLostError:
        """The error of a failed collective, naming the ranks that did not answer a roll call."""
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        missing = self._roll_call()
        who = (
            f"rank {', '.join(map(str, missing))} of {self.size} is lost (no answer within "
            f"{ROLL_CALL_SECONDS:g} s)"
            if missing
            else "a rank is lost (the rendezvous store is gone too, so which one is unknown)"
        )
        return RankLostError(f"data parallel: {what} failed on rank {self.rank}: {who}. ({reason})")

    def _roll_call(self) -> list[int] | None:
        """The ranks that do not set their key in the store within ``ROLL_CALL_SECONDS``: each
        survivor sets its own; None when the store itself is unreachable."""
        import os

        dist = _dist()
        try:
            store = dist.distributed_c10d._get_default_store()  # torch has no public getter
            prefix = f"ort_ascend_ops/roll_call/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
            store.set(f"{prefix}/{self.rank}", "here")
            keys = [f"{prefix}/{r}" for r in range(self.size)]
            deadline = time.monotonic() + ROLL_CALL_SECONDS
            while True:
                missing = [r for r, key in enumerate(keys) if not store.check([key])]
                if not missing or time.monotonic() > deadline:
                    return missing
                time.sleep(0.2)
        except Exception:  # noqa: BLE001 (the store's failures have no common type)
            return None


def _tensor(array: np.ndarray):
    import torch

    if array.dtype not in (np.float32, np.float64, np.float16, np.int64, np.int32):
        raise TypeError(f"data parallel: torch.distributed takes no {array.dtype} buffer from NumPy")
    return torch.from_numpy(array)


def join(timeout_seconds: float) -> Ranks | None:
    """Under ``torchrun`` (``WORLD_SIZE`` above 1 in the environment), this process's rank in the
    default group, initialized from the environment torchrun sets (gloo, each collective
    failing after ``timeout_seconds``); None in a single process."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    try:
        dist = _dist()
    except ImportError:
        raise RankMismatchError("data parallel runs on torch.distributed: pip install torch") from None
    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timedelta(seconds=timeout_seconds))
    return current()


def leave() -> None:
    """Ends the process group ``join`` began (torch warns at exit otherwise)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def environment() -> tuple[int, int]:
    """This process's rank and the number of processes as torchrun sets them (0 and 1 alone)."""
    import os

    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def restarted() -> bool:
    """Whether torchrun restarted this worker after a failure (``--max-restarts``)."""
    import os

    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0


def shards(sizes: Sequence[int], ranks: int) -> list[int]:
    """The owner of each of ``sizes``' tensors, in order, as contiguous runs balanced by
    element count: tensor i goes to the rank whose 1/N of the elements holds its first one."""
    total = max(1, sum(sizes))
    starts = np.cumsum([0, *sizes[:-1]]) if sizes else []
    return [min(ranks - 1, int(start * ranks // total)) for start in starts]
