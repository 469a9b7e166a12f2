"""Many processes on ``torch.distributed``, launched by ``torchrun``: we build no communication of
our own. ``DataParallel`` is the one object of a group of processes: its ranks, its buckets, ZeRO
stage 1's shards and every collective the training API runs, made once (``join`` from torchrun's
environment, ``of`` from a process group).

Gradients are averaged as torch's DDP averages them, in buckets of at most ``BUCKET_MB``
(DDP's ``bucket_cap_mb``) cut from the gradient buffers (``checkpoint_state.Buffers``) in one fixed
order, so that every run sums alike. The collectives read and write, through ``torch.from_numpy``,
the very memory ONNX Runtime wrote (host views the checkpoint state gives): no copy. Two buckets
are under way at a time (``IN_FLIGHT``), so that averaging one overlaps the next one's transfer;
ONNX Runtime runs the backward as one call, so the transfer cannot start before the last gradient
exists, as DDP's does during its backward.

On NPUs (a state in ``DeviceMemory``) the collectives are HCCL's (``hccl.Communicator``), device
to device, the communicator bootstrapped through torch.distributed's store: the gradients are
all-reduced inside the training graph as the backward makes them (``gradient_buckets``; the module
waits for the communicator's stream after the run), or after the run where a step accumulates
micro-batches or ZeRO-1 reduce-scatters; gloo then carries only control (the settings check, the
losses shown, the roll call).

ZeRO stage 1 (``Shards``) splits each gradient buffer into one contiguous run of parameters per
rank: the gradients are reduce-scattered (each rank receives the mean of its run only), each
rank updates its run's parameters and holds their optimizer states, and the parameters are then
broadcast from their owners (the all-gather), as ``ZeroRedundancyOptimizer`` does.

A collective that fails (a rank killed: gloo sees its connections close at once; a rank stalled:
the process group's timeout, ``--collective-timeout``) raises ``RankLostError`` naming the ranks
that did not answer a roll call on the rendezvous store within ``ROLL_CALL_SECONDS``: never a
hang."""

from __future__ import annotations

import collections
import dataclasses
import importlib.metadata
import itertools
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np
import onnxruntime as ort

from .checkpoint_state import Buffers
from .hccl import Communicator, HcclError

if TYPE_CHECKING:
    from .device_memory import DeviceBuffers

BUCKET_MB = 25
# Collectives under way at once: gloo runs two at a time (its default worker threads) and holds a
# temporary copy of each reduce-scatter's buckets, so more would buy no overlap and cost memory.
IN_FLIGHT = 2
ROLL_CALL_SECONDS = 10.0
COLLECTIVE_TIMEOUT = 300.0  # seconds; torch's own default for gloo is 30 minutes

# A launched collective, and what to do with its tensor once it is done (None: nothing).
_Launched = tuple[object, Callable[[], object] | None]
_log = logging.getLogger(__name__)
_said_default_group = False
_communicators = 0
_opened: list[Communicator] = []  # destroyed by leave()


class RankLostError(RuntimeError):
    """A collective failed because a rank is gone (killed, or stalled past the timeout)."""


class RankMismatchError(ValueError):
    """Ranks that would train different things: another model, setting or package version."""


@dataclasses.dataclass(frozen=True)
class Launch:
    """What ``torchrun`` tells a process in its environment (a single process: rank 0 of 1)."""

    rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    local_rank: int = 0
    restarts: int = 0  # times torchrun restarted the workers after a failure (--max-restarts)
    master: str = ""  # the rendezvous address, for messages

    @classmethod
    def from_environment(cls) -> Launch:
        env = os.environ
        return cls(
            int(env.get("RANK", "0")),
            int(env.get("WORLD_SIZE", "1")),
            int(env.get("LOCAL_WORLD_SIZE", "1")),
            int(env.get("LOCAL_RANK", "0")),
            int(env.get("TORCHELASTIC_RESTART_COUNT", "0")),
            f"{env.get('MASTER_ADDR')}:{env.get('MASTER_PORT')}",
        )

    def threads_per_process(self) -> int:
        """The cores of this machine shared among the processes torchrun started on it."""
        return max(1, len(os.sched_getaffinity(0)) // self.local_world_size)


def _dist():
    import torch.distributed as dist

    return dist


@dataclasses.dataclass(frozen=True)
class Shards:
    """ZeRO stage 1's split of the gradient buffers: in buffer ``i`` rank ``r`` owns elements
    ``bounds[i][r]:bounds[i][r + 1]``, the gradients of the parameters ``owners`` gives it."""

    bounds: list[list[int]]
    owners: dict[str, int]

    @classmethod
    def of(cls, buffers: Buffers, ranks: int) -> Shards:
        """Each buffer cut at parameter boundaries into ``ranks`` runs of about equal size: a
        parameter goes to the rank whose 1/N of the buffer holds its first element. Buffers laid
        out in ``Slots`` (the NPU's) are cut at their slots."""
        if buffers.slots is not None:
            sizes = [int(np.prod(flat.shape(), dtype=np.int64)) for flat in buffers.flat]
            return cls(
                [[n * r // ranks for r in range(ranks + 1)] for n in sizes], dict(buffers.slots.owners)
            )
        owners: dict[str, int] = {}
        bounds = []
        for index, flat in enumerate(buffers.flat):
            size = int(np.prod(flat.shape(), dtype=np.int64))
            spans = sorted((start, name) for name, (i, start, _) in buffers.spans.items() if i == index)
            length = max(1, size)
            for start, name in spans:
                owners[name] = min(ranks - 1, start * ranks // length)
            cuts = [0]
            for r in range(1, ranks):
                cuts.append(next((s for s, n in spans if owners[n] >= r), size))
            bounds.append([*cuts, size])
        return cls(bounds, owners)


class DataParallel:
    """The processes of one group and the collectives the training API runs over them, made by
    ``join`` or ``of``. ``shards``: ZeRO stage 1's, once an optimizer asked for them (``shard``);
    ``seconds``: the time spent in the collectives of gradients and parameters (for the bench)."""

    def __init__(self, group=None, bucket_mb: float = BUCKET_MB):
        dist = _dist()
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.bucket_bytes = int(bucket_mb * 2**20)
        self.shards: Shards | None = None
        self.seconds = 0.0
        self.launch = Launch.from_environment()
        self.timeout_seconds = COLLECTIVE_TIMEOUT
        self._hccl: Communicator | None = None

    @classmethod
    def of(cls, process_group=None) -> DataParallel | None:
        """``process_group``'s processes (a ``DataParallel`` is taken as it is), else those of
        torch.distributed's default group once it is initialized, as DDP takes it; None in a
        single process (or a group of one)."""
        global _said_default_group
        if isinstance(process_group, DataParallel):
            return process_group
        if process_group is None:
            dist = sys.modules.get("torch.distributed")  # not imported: nothing can be initialized
            if dist is None or not dist.is_available() or not dist.is_initialized():
                return None
        parallel = cls(process_group)
        if parallel.size == 1:
            return None
        if process_group is None and not _said_default_group:
            _said_default_group = True
            _log.warning(
                "training.api: torch.distributed is initialized, so the module runs data parallel over its "
                "default group of %d processes (DistributedDataParallel's behaviour: rank 0's parameters, "
                "gradients averaged); pass process_group= to choose another group",
                parallel.size,
            )
        return parallel

    @classmethod
    def join(cls, timeout_seconds: float = COLLECTIVE_TIMEOUT) -> DataParallel | None:
        """Under ``torchrun`` (a world of more than one process), this process's group,
        initialized from the environment torchrun sets (gloo, each collective failing after
        ``timeout_seconds``); None in a single process."""
        launch = Launch.from_environment()
        if launch.world_size <= 1:
            return None
        try:
            dist = _dist()
        except ImportError:
            raise RankMismatchError("data parallel runs on torch.distributed: pip install torch") from None
        if not dist.is_initialized():
            timeout = timedelta(seconds=timeout_seconds)
            try:
                store, rank, size = next(dist.rendezvous("env://", timeout=timeout))
                # torchrun's c10d rendezvous (--standalone, --rdzv-backend c10d) keeps its store
                # across restarts, where gloo would read the killed ranks' addresses: one prefix
                # per attempt.
                attempt = dist.PrefixStore(f"ort_ascend_ops/attempt{launch.restarts}", store)
                dist.init_process_group("gloo", store=attempt, rank=rank, world_size=size, timeout=timeout)
            except RuntimeError as error:  # the store's and gloo's timeouts and refused connections
                raise RankLostError(
                    f"data parallel: the {launch.world_size} processes did not all meet at {launch.master} "
                    f"within {timeout_seconds:g} s ({_first_line(error)})"
                ) from None
        if dist.get_world_size() <= 1:
            return None
        parallel = cls(None)
        parallel.timeout_seconds = timeout_seconds
        return parallel

    def hccl(self, device_id: int) -> Communicator:
        """The HCCL communicator of this group's NPUs, this rank's being ``device_id``: made on
        first use from rank 0's root info in torch.distributed's store."""
        if self._hccl is None:
            store = _dist().distributed_c10d._get_default_store()  # torch has no public getter
            global _communicators
            _communicators += 1  # every rank makes its communicators in the same order
            key = f"ort_ascend_ops/hccl/{self.launch.restarts}/{_communicators}"
            try:
                self._hccl = Communicator(store, key, self.rank, self.size, device_id, self.timeout_seconds)
                _opened.append(self._hccl)
            except (HcclError, RuntimeError) as error:  # the store's timeout too
                raise RankLostError(
                    f"data parallel: rank {self.rank} of {self.size} could not join the HCCL communicator "
                    f"on npu:{device_id}: {_first_line(error)}"
                ) from None
        return self._hccl

    def _on_device(self, what: str, device_id: int, queue: Callable[[Communicator], None]) -> None:
        """``queue``'s collectives run on the NPUs and waited for; a failure a ``RankLostError``."""
        start = time.perf_counter()
        hccl = self.hccl(device_id)
        try:
            queue(hccl)
            hccl.wait(what)
        except HcclError as error:
            raise self.lost(what, error) from None
        finally:
            self.seconds += time.perf_counter() - start

    def reduce_device_gradients(self, gradients: DeviceBuffers, found_inf: ort.OrtValue | None) -> None:
        """The gradients' device buffers replaced, in place, by their mean over the ranks,
        device to device through HCCL; fp16-mixed's overflow flag ``found_inf`` (a device
        float32) made the maximum over the ranks there too."""
        memory = gradients.memory

        def queue(hccl: Communicator) -> None:
            if found_inf is not None:
                hccl.all_reduce([found_inf], "max")
            if self.shards is None:
                hccl.all_reduce(gradients.flat)
            else:
                hccl.reduce_scatter(gradients.flat)

        what = "the gradients' " + ("all-reduce" if self.shards is None else "reduce-scatter")
        self._on_device(what, memory.device_id, queue)
        gradients.scale(1.0 / self.size)

    def all_gather_device(self, parameters: DeviceBuffers) -> None:
        """ZeRO stage 1's all-gather on the NPU: each rank's slot of the parameters' buffers (laid
        out in ``Slots``) to every rank."""
        self._on_device(
            "the parameters' all-gather",
            parameters.memory.device_id,
            lambda hccl: hccl.all_gather(parameters.flat),
        )

    def wait_for_graph(self, device_id: int) -> None:
        """After a training run whose graph all-reduced the gradients (``gradient_buckets``): waits
        for the communicator's stream, whose time is what the backward did not hide."""
        self._on_device("the gradients' all-reduce in the backward", device_id, lambda hccl: None)

    def broadcast_device(
        self, values: Sequence[ort.OrtValue], device_id: int, what: str, root: int = 0
    ) -> None:
        """Each device value overwritten, on every rank, by rank ``root``'s."""
        self._on_device(what, device_id, lambda hccl: hccl.broadcast(values, self._global(root)))

    def _run(self, what: str, collectives: Iterable[_Launched]) -> None:
        """Launches ``collectives`` (each drawn from the iterable launches one) with at most
        ``IN_FLIGHT`` under way, each one's follow-up run as it is done; a failure turned into
        ``RankLostError``."""
        start = time.perf_counter()
        pending: collections.deque[_Launched] = collections.deque()

        def finish() -> None:
            work, then = pending.popleft()
            work.wait()  # type: ignore[attr-defined]
            if then is not None:
                then()

        try:
            for launched in collectives:
                pending.append(launched)
                if len(pending) == IN_FLIGHT:
                    finish()
            while pending:
                finish()
        except RuntimeError as error:  # DistBackendError, gloo's closed connections, timeouts
            raise self.lost(what, error) from None
        finally:
            self.seconds += time.perf_counter() - start

    def _pieces(self, length: int, itemsize: int) -> int:
        """How many buckets a buffer of ``length`` elements is sent in."""
        return max(1, -(-length * itemsize // self.bucket_bytes))

    def _with_flag(self, what: str, found_inf: bool | None, buckets: Iterator[_Launched]) -> bool:
        """``buckets``' collectives run after fp16-mixed's overflow flag is all-reduced (MAX)
        when ``found_inf`` is given; whether any rank found an inf or NaN."""
        import torch

        dist = _dist()
        flag = torch.tensor([float(bool(found_inf))])

        def collectives() -> Iterator[_Launched]:
            if found_inf is not None:
                yield dist.all_reduce(flag, dist.ReduceOp.MAX, group=self.group, async_op=True), None
            yield from buckets

        self._run(what, collectives())
        return bool(flag.item())

    def shard(self, gradients: Buffers) -> Shards:
        """ZeRO stage 1 from now on: ``gradients`` split over the ranks (``Shards.of``), which
        ``reduce_gradients`` then reduce-scatters."""
        self.shards = Shards.of(gradients, self.size)
        return self.shards

    def reduce_gradients(self, arrays: Sequence[np.ndarray], found_inf: bool | None = None) -> bool:
        """The gradients' 1-D buffers ``arrays`` replaced, in place, by their mean over the ranks
        (under ZeRO stage 1, each rank's run alone, on that rank: the rest of a buffer keeps this
        rank's own values); with ``found_inf`` given, whether any rank found an inf or NaN."""
        if self.shards is None:
            return self._average(arrays, found_inf)
        return self._reduce_scatter(arrays, self.shards, found_inf)

    def _average(self, arrays: Sequence[np.ndarray], found_inf: bool | None) -> bool:
        dist = _dist()

        def buckets() -> Iterator[_Launched]:
            for array in arrays:
                n = self._pieces(array.size, array.itemsize)
                for k in range(n):
                    bucket = _tensor(array[array.size * k // n : array.size * (k + 1) // n])
                    work = dist.all_reduce(bucket, group=self.group, async_op=True)
                    yield work, _scaling(bucket, 1.0 / self.size)

        return self._with_flag("the gradients' all-reduce", found_inf, buckets())

    def _reduce_scatter(self, arrays: Sequence[np.ndarray], shards: Shards, found_inf: bool | None) -> bool:
        dist = _dist()

        def buckets() -> Iterator[_Launched]:
            for array, bounds in zip(arrays, shards.bounds, strict=True):
                n = self._pieces(array.size, array.itemsize)
                for k in range(n):
                    pieces = [
                        _tensor(array[lo + (hi - lo) * k // n : lo + (hi - lo) * (k + 1) // n])
                        for lo, hi in itertools.pairwise(bounds)
                    ]
                    mine = pieces[self.rank]
                    work = dist.reduce_scatter(mine, pieces, group=self.group, async_op=True)
                    yield work, _scaling(mine, 1.0 / self.size)

        return self._with_flag("the gradients' reduce-scatter", found_inf, buckets())

    def all_gather(self, arrays: Sequence[np.ndarray]) -> None:
        """ZeRO stage 1's all-gather of the updated parameters, laid out as their gradients:
        each rank's run of each buffer broadcast from that rank, bucket by bucket."""
        dist = _dist()
        assert self.shards is not None, "all_gather needs the shards of shard()"
        shards = self.shards

        def buckets() -> Iterator[_Launched]:
            for array, bounds in zip(arrays, shards.bounds, strict=True):
                for r, (lo, hi) in enumerate(itertools.pairwise(bounds)):
                    n = self._pieces(hi - lo, array.itemsize)
                    for k in range(n if hi > lo else 0):
                        run = array[lo + (hi - lo) * k // n : lo + (hi - lo) * (k + 1) // n]
                        yield (
                            dist.broadcast(_bytes(run), self._global(r), group=self.group, async_op=True),
                            None,
                        )

        self._run("the parameters' all-gather", buckets())

    def norm(self, local: float, norm_type: float) -> float:
        """The ``norm_type`` norm over every rank's gradients, from the norm of each rank's own
        (ZeRO stage 1's clipping)."""
        import torch

        dist = _dist()
        infinite = norm_type == float("inf")
        value = torch.tensor([local if infinite else local**norm_type], dtype=torch.float64)
        op = dist.ReduceOp.MAX if infinite else dist.ReduceOp.SUM
        self._run(
            "the gradients' norm", [(dist.all_reduce(value, op, group=self.group, async_op=True), None)]
        )
        return float(value.item() if infinite else value.item() ** (1.0 / norm_type))

    def mean(self, values: Sequence[float], what: str) -> list[float]:
        """The mean over ranks of a few float64 scalars (a loss, a flag)."""
        import torch

        dist = _dist()
        tensor = torch.tensor(list(values), dtype=torch.float64)
        self._run(what, [(dist.all_reduce(tensor, group=self.group, async_op=True), None)])
        return [float(v) / self.size for v in tensor]

    def broadcast(self, arrays: Sequence[np.ndarray], sources: Sequence[int], what: str) -> None:
        """Each of ``arrays`` overwritten, on every rank, by its value on its source rank."""
        dist = _dist()
        self._run(
            what,
            (
                (dist.broadcast(_bytes(a), self._global(src), group=self.group, async_op=True), None)
                for a, src in zip(arrays, sources, strict=True)
            ),
        )

    def send_to(self, array: np.ndarray, rank: int, what: str) -> None:
        dist = _dist()
        self._run(what, [(dist.isend(_bytes(array), self._global(rank), group=self.group), None)])

    def receive_from(self, array: np.ndarray, rank: int, what: str) -> None:
        dist = _dist()
        self._run(what, [(dist.irecv(_bytes(array), self._global(rank), group=self.group), None)])

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
        missing = self._roll_call()
        if missing is None:
            who = "a rank is lost (the rendezvous store is gone too, so which one is unknown)"
        elif missing:
            who = f"rank {', '.join(map(str, missing))} of {self.size} is lost (no answer within {ROLL_CALL_SECONDS:g} s)"
        else:
            who = "every rank answered a roll call, so none is lost: the collective itself failed"
        return RankLostError(
            f"data parallel: {what} failed on rank {self.rank}: {who}. ({_first_line(error)})"
        )

    def _roll_call(self) -> list[int] | None:
        """The ranks that do not set their key in the store within ``ROLL_CALL_SECONDS``: each
        survivor sets its own; None when the store itself is unreachable."""
        dist = _dist()
        try:
            store = dist.distributed_c10d._get_default_store()  # torch has no public getter
            prefix = f"ort_ascend_ops/roll_call/{self.launch.restarts}"
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


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _scaling(tensor, factor: float) -> Callable[[], object]:
    return lambda: tensor.mul_(factor)


def _tensor(array: np.ndarray):
    """A torch tensor over ``array``'s memory, for the collectives that add."""
    import torch

    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def _bytes(array: np.ndarray):
    """A torch tensor over ``array``'s bytes, for the collectives that only move them."""
    import torch

    return torch.from_numpy(array.reshape(-1).view(np.uint8))


def versions() -> dict[str, str]:
    """The packages whose versions every rank must share."""

    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    import onnxruntime  # its distribution's name is the build's (onnxruntime-cann, ...)

    return {"ort_ascend_ops": version("ort_ascend_ops"), "onnxruntime": onnxruntime.__version__} | {
        "torch": version("torch")
    }


def leave() -> None:
    """Ends the process group ``join`` began (torch warns at exit otherwise), and the HCCL
    communicators made over it."""
    while _opened:
        _opened.pop().close()
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
