"""The emulated HCCL (libhccl.so): ranks in processes of their own, one emulated device each, meet
through the root info rank 0 makes (handed to the others through the test) and run collectives on
their streams. Results are checked against NumPy oracles on the inputs the test drew; failures (a
rank killed, ranks that disagree, a rank that never comes) must come fast and name what went wrong.
What each rank does is in hccl_ranks.py: the ranks are started once for the module (a test that
ends one has it started again by the next), every wait for them has a timeout, and teardown kills
what is left."""

from __future__ import annotations

import os
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hccl_ranks import (
    EXITED,
    MAX,
    MIN,
    PROD,
    SUM,
    Ranks,
    all_reduce_after_a_peer_died,
    counted,
    device_count,
    die_after_init,
    init_on,
    mismatched_counts,
    refusals,
)

BF16 = np.dtype(ml_dtypes.bfloat16)
E_PARA, E_PTR, E_INTERNAL, E_TIMEOUT, E_RUNTIME, E_REMOTE = 1, 2, 4, 9, 15, 21
KERNEL_FAILED, STREAM_HAZARD, INVALID_DEVICE = 507015, 507000, 107001
SLOT = 1 << 20  # bytes a rank moves per round (hccl_group.h's kSlotBytes)


@pytest.fixture(scope="module")
def ranks():
    from ort_ascend_ops import aclnn_emulator

    pool = Ranks(os.path.join(aclnn_emulator.home(), "lib64"))
    yield pool
    pool.close()


OPS = {SUM: np.add, PROD: np.multiply, MAX: np.maximum, MIN: np.minimum}


def rank_order(xs: list[np.ndarray], op: int) -> np.ndarray:
    """Rank 0's value, then rank 1's combined in, and so on, in the inputs' own type: float32 sums
    are NumPy's ((x0 + x1) + x2) in float32, integers wrap."""
    acc = xs[0].copy()
    for x in xs[1:]:
        acc = OPS[op](acc, x)
    return acc


def oracle(xs: list[np.ndarray], op: int) -> np.ndarray:
    """float16 and bfloat16: the exact (float64) result rounded once; the other types rank_order."""
    if xs[0].dtype in (np.dtype(np.float16), BF16):
        return rank_order([x.astype(np.float64) for x in xs], op).astype(xs[0].dtype)
    return rank_order(xs, op)


def assert_same_bits(out: np.ndarray, expected: np.ndarray, what: str) -> None:
    assert out.dtype == expected.dtype and out.shape == expected.shape, what
    bits = np.dtype(f"u{out.itemsize}")
    differ = np.flatnonzero(out.view(bits) != expected.view(bits))
    assert differ.size == 0, f"{what}: element {differ[0]}: {out[differ[0]]!r} != {expected[differ[0]]!r}"


def draw(rng, dtype, count: int) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, count, dtype=dtype, endpoint=True)
    return rng.standard_normal(count).astype(dtype)


# float32 elements in one slot, and a count past it that is no multiple of it.
PAST_A_SLOT = SLOT // 4 + 1000


@pytest.mark.parametrize("n", [2, 3])
def test_all_reduce_matches_the_rank_order_oracle_on_every_rank(ranks, rng, n):
    cases = [
        (np.float32, SUM, PAST_A_SLOT),
        (np.float16, SUM, 3000),
        (BF16, SUM, 3000),
        (np.int32, SUM, 1000),  # full-range values: the sum wraps
        (np.float32, MAX, 500),
        (np.float32, MIN, 500),
        (np.float32, PROD, 500),
        (np.int8, PROD, 500),
        (np.float64, SUM, 500),
        (np.uint16, MAX, 500),
        (BF16, MIN, 0),
    ]
    inputs = [[draw(rng, dtype, count) for dtype, _, count in cases] for _ in range(n)]
    steps = [
        [
            {"call": "all_reduce", "x": x, "op": op, "in_place": i % 2 == 1}
            for i, (x, (_, op, _)) in enumerate(zip(xs, cases, strict=True))
        ]
        for xs in inputs
    ]
    results = ranks.program(steps)
    for i, (dtype, op, count) in enumerate(cases):
        expected = oracle([inputs[r][i] for r in range(n)], op)
        for r in range(n):
            assert_same_bits(
                results[r][i], expected, f"rank {r}, {np.dtype(dtype).name} op {op} count {count}"
            )


def test_reduce_scatter_gives_each_rank_its_block(ranks, rng):
    n = 3
    per_round = SLOT // (4 * n)  # a ReduceScatter round moves a piece of every block
    cases = [(np.float32, SUM, per_round + 500, False), (BF16, MAX, 999, True), (np.float16, SUM, 64, True)]
    inputs = [[draw(rng, dtype, n * count) for dtype, _, count, _ in cases] for _ in range(n)]
    steps = [
        [
            {"call": "reduce_scatter", "x": x, "op": op, "in_place": in_place}
            for x, (_, op, _, in_place) in zip(xs, cases, strict=True)
        ]
        for xs in inputs
    ]
    results = ranks.program(steps)
    for i, (dtype, op, count, _) in enumerate(cases):
        whole = oracle([inputs[r][i] for r in range(n)], op)
        for r in range(n):
            assert_same_bits(
                results[r][i], whole[r * count : (r + 1) * count], f"rank {r}, {np.dtype(dtype).name}"
            )


def test_all_gather_concatenates_in_rank_order_and_broadcast_copies_the_root(ranks, rng):
    n = 3
    gathers = [(np.int32, PAST_A_SLOT, False), (np.float16, 777, True), (np.float32, 0, False)]
    gather_inputs = [[draw(rng, dtype, count) for dtype, count, _ in gathers] for _ in range(n)]
    broadcast_inputs = [draw(rng, np.float32, PAST_A_SLOT) for _ in range(n)]
    steps = [
        [
            {"call": "all_gather", "x": x, "in_place": in_place}
            for x, (_, _, in_place) in zip(gather_inputs[r], gathers, strict=True)
        ]
        + [{"call": "barrier"}, {"call": "broadcast", "x": broadcast_inputs[r], "root": 1}]
        for r in range(n)
    ]
    results = ranks.program(steps)
    for r in range(n):
        for i, (dtype, _, in_place) in enumerate(gathers):
            expected = np.concatenate([gather_inputs[k][i] for k in range(n)])
            assert_same_bits(
                results[r][i], expected, f"rank {r}, gather {np.dtype(dtype).name} in place {in_place}"
            )
        assert_same_bits(results[r][-1], broadcast_inputs[1], f"rank {r}, broadcast from rank 1")


def test_collectives_that_differ_across_ranks_fail_on_every_rank_naming_both(ranks):
    root = ranks.root()
    answers = ranks.run(mismatched_counts, [(root, 2, 10), (root, 2, 12)])
    reason = "HcclAllReduce (the communicator's collective 0) does not match across ranks: rank 1 passed count 12, rank 0 count 10"
    for answer in answers:
        code, message = answer["waited"]
        assert code == KERNEL_FAILED and f"HcclAllReduce failed with {E_PARA}: {reason}" in message, message
        assert answer["again"] == (E_PARA, f"HcclAllReduce: the communicator is broken: {reason}")


@pytest.mark.parametrize(
    "n_ranks, devices, expected",
    [
        (
            (2, 3),
            (0, 1),
            ["rank ", " was given nRanks ", "nRanks 2", "nRanks 3", "every rank must pass the same nRanks"],
        ),
        ((2, 2), (0, 0), ["ranks 0 and 1 both use device 0"]),
    ],
    ids=["n_ranks_disagree", "one_device"],
)
def test_ranks_that_disagree_are_refused_on_every_rank(ranks, n_ranks, devices, expected):
    root, env = ranks.root(), {"HCCL_CONNECT_TIMEOUT": "10"}
    answers = ranks.run(
        init_on,
        [(root, n, rank, device, env) for rank, (n, device) in enumerate(zip(n_ranks, devices, strict=True))],
    )
    for code, message in answers:
        assert code == E_PARA and message.startswith("HcclCommInitRootInfo: "), message
        assert all(words in message for words in expected), message
    assert answers[0][1] == answers[1][1]  # one reason, posted by the rank that saw it


def test_two_processes_claiming_one_rank_are_refused(ranks):
    root, env = ranks.root(), {"HCCL_CONNECT_TIMEOUT": "10"}
    answers = ranks.run(init_on, [(root, 2, 0, 0, env), (root, 2, 0, 1, env)])
    for code, message in answers:
        assert code == E_PARA and "rank 0 is claimed by two processes: pid " in message, message


def test_a_rank_that_never_comes_times_the_others_out_and_leaves_no_segment(ranks):
    root = ranks.root()
    start = time.monotonic()
    [(code, message)] = ranks.run(init_on, [(root, 3, 0, 0, {"HCCL_CONNECT_TIMEOUT": "1"})])
    assert code == E_TIMEOUT, message
    assert "ranks 1 and 2 did not arrive within 1 s (HCCL_CONNECT_TIMEOUT); 1 of 3 ranks did" in message
    assert time.monotonic() - start < 5
    name = root.split(b"\0", 1)[0].decode()
    assert not Path("/dev/shm" + name).exists()


def test_the_device_count_comes_from_aclemu_device_count(ranks):
    [seen] = ranks.run(device_count, [()])
    (_, default, one, device_1), (_, set_2, two, device_1_of_2), *malformed = seen
    assert (default, one, set_2, two, device_1_of_2) == ((0, ""), 1, (0, ""), 2, (0, ""))
    assert (
        device_1[0] == INVALID_DEVICE
        and "device 1 does not exist (1 emulated; ACLEMU_DEVICE_COUNT" in device_1[1]
    )
    for value, (code, message), _, set_device in malformed:
        assert code == INVALID_DEVICE and f"ACLEMU_DEVICE_COUNT={value} is not an integer in 1..64" in message
        assert set_device[0] == INVALID_DEVICE and "ACLEMU_DEVICE_COUNT" in set_device[1]


def test_calls_and_collective_bytes_count_what_each_rank_queued(ranks):
    root = ranks.root()
    for answer in ranks.run(counted, [(root, 2), (root, 2)]):
        assert answer["refused"][0] == E_PARA and "dataType 12 is not an HcclDataType" in answer["refused"][1]
        assert answer["calls"] == {
            "HcclAllReduce": 2,  # the refused call counts as a call, not in bytes
            "HcclReduceScatter": 1,
            "HcclAllGather": 1,
            "HcclBroadcast": 1,
            "HcclBarrier": 1,
        }
        assert answer["bytes"] == {
            "HcclAllReduce": 100 * 4,
            "HcclReduceScatter": 2 * 10 * 2,  # the whole sendBuf: nRanks * recvCount float16
            "HcclAllGather": 7 * 4,
            "HcclBroadcast": 5 * 8,  # on the root and elsewhere alike
            "HcclBarrier": 0,
            "aclrtMemcpy": -1,
        }
        assert answer["after_reset"] == 0


def test_arguments_are_checked_at_the_call_naming_the_rule(ranks):
    root = ranks.root()
    [seen] = ranks.run(refusals, [(root,)])
    expected = {
        "no_device": (
            E_RUNTIME,
            "HcclCommInitRootInfo: no device set on this thread: call aclrtSetDevice first",
        ),
        "n_ranks_0": (E_PARA, "HcclCommInitRootInfo: nRanks is 0"),
        "rank_past_n": (E_PARA, "HcclCommInitRootInfo: rank 2 is not below nRanks 2"),
        "foreign_root": (E_PARA, "HcclCommInitRootInfo: rootInfo was not made by HcclGetRootInfo"),
        "null_comm": (E_PTR, "HcclCommInitRootInfo: comm is NULL"),
        "bad_timeout": (
            E_PARA,
            "HcclCommInitRootInfo: HCCL_CONNECT_TIMEOUT=soon is not a whole number of seconds",
        ),
        "null_send": (E_PTR, "HcclAllReduce: sendBuf is NULL"),
        "bad_dtype": (E_PARA, "HcclAllReduce: dataType 12 is not an HcclDataType"),
        "bad_op": (E_PARA, "HcclAllReduce: op 4 is not an HcclReduceOp"),
        "root_past_n": (E_PARA, "HcclBroadcast: root 1 is not below the communicator's 1 ranks"),
        "partial_overlap": (E_PARA, "HcclAllReduce: recvBuf "),
        "dead_stream": (E_PARA, "HcclAllReduce: stream is not a live aclrtStream"),
        "null_comm_call": (E_PTR, "HcclAllReduce: comm is NULL"),
        "foreign_comm": (E_PARA, "HcclAllReduce: comm is not a live HcclComm"),
        "empty_with_null": (0, ""),
        "injected": (7, "HcclAllReduce: injected"),
        # The collective's recvBuf is written by its queued work: the stream checks see it.
        "read_before_wait": (STREAM_HAZARD, "aclrtMemcpy: src "),
        "destroy_queued": (
            E_INTERNAL,
            "HcclCommDestroy: 2 collectives queued on this communicator have not run: synchronize",
        ),
        "destroy_twice": (E_PARA, "HcclCommDestroy: comm is not a live HcclComm"),
    }
    for case, (code, start) in expected.items():
        assert seen[case][0] == code and seen[case][1].startswith(start), (case, seen[case])
    assert "overlaps sendBuf" in seen["partial_overlap"][1]
    assert "is written by HcclAllReduce queued on stream" in seen["read_before_wait"][1]
    assert seen["size_and_rank"] == (1, 0)
    assert seen["injected_bytes"] == 0


# Last: the rank it ends is started again only if another test follows.
def test_a_killed_rank_fails_the_peers_wait_at_once_naming_it(ranks):
    root = ranks.root()
    survivor, died = ranks.each([(all_reduce_after_a_peer_died, (root, 2)), (die_after_init, (root, 2))])
    assert died == EXITED
    code, message = survivor["waited"]
    assert code == KERNEL_FAILED, message
    assert "HcclAllReduce failed with 21" in message and "rank 1 (pid " in message and ") is gone" in message
    assert survivor["seconds"] < 5, survivor  # HCCL_EXEC_TIMEOUT was 60: the death was seen, not waited out
    code, message = survivor["again"]
    assert code == E_REMOTE and "HcclAllReduce: the communicator is broken: rank 1 (pid " in message, message
