"""The emulated CANN runtime's streams hold their work until the host waits, so the mistakes an
asynchronous device punishes fail here too: reading a device value before the work writing it ran,
freeing memory queued work still uses, a kernel failure reported at the wait."""

import ctypes

import numpy as np
import pytest

from ort_ascend_ops import aclnn_emulator

HOST_TO_DEVICE, DEVICE_TO_HOST = 1, 2
STREAM_HAZARD, KERNEL_FAILED = 507000, 507015


@pytest.fixture
def acl(emulator):
    lib = emulator
    for name in (
        "aclrtMalloc",
        "aclrtFree",
        "aclrtCreateStream",
        "aclrtDestroyStream",
        "aclrtSynchronizeStream",
        "aclrtMemcpy",
        "aclrtMemcpyAsync",
        "aclrtMemsetAsync",
        "aclrtSynchronizeDevice",
    ):
        getattr(lib, name).restype = ctypes.c_int
    lib.aclrtMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int]
    lib.aclrtFree.argtypes = [ctypes.c_void_p]
    lib.aclrtCreateStream.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.aclrtDestroyStream.argtypes = [ctypes.c_void_p]
    lib.aclrtSynchronizeStream.argtypes = [ctypes.c_void_p]
    copy = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    lib.aclrtMemcpy.argtypes = copy
    lib.aclrtMemcpyAsync.argtypes = [*copy, ctypes.c_void_p]
    lib.aclrtMemsetAsync.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int32,
        ctypes.c_size_t,
        ctypes.c_void_p,
    ]
    for name in ("aclrtCreateEvent", "aclrtDestroyEvent", "aclrtRecordEvent", "aclrtStreamWaitEvent"):
        getattr(lib, name).restype = ctypes.c_int
    lib.aclrtCreateEvent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.aclrtDestroyEvent.argtypes = [ctypes.c_void_p]
    lib.aclrtRecordEvent.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.aclrtStreamWaitEvent.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
    return lib


def make(acl, size):
    stream, device = ctypes.c_void_p(), ctypes.c_void_p()
    assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0
    assert acl.aclrtMalloc(ctypes.byref(device), size, 0) == 0
    return stream, device


def test_work_runs_at_the_wait_in_order(acl):
    src = np.arange(16, dtype=np.float32)
    out = np.zeros_like(src)
    stream, device = make(acl, src.nbytes)
    assert acl.aclrtMemcpyAsync(device, src.nbytes, src.ctypes.data, src.nbytes, HOST_TO_DEVICE, stream) == 0
    assert acl.aclrtMemsetAsync(device, src.nbytes, 0, 8, stream) == 0  # zeroes the first two floats
    assert acl.aclrtMemcpyAsync(out.ctypes.data, out.nbytes, device, src.nbytes, DEVICE_TO_HOST, stream) == 0
    assert not out.any()  # nothing ran yet
    assert acl.aclrtSynchronizeStream(stream) == 0
    np.testing.assert_array_equal(out, np.r_[0, 0, src[2:]])
    assert (acl.aclrtFree(device), acl.aclrtDestroyStream(stream)) == (0, 0)


def test_reading_a_device_value_before_the_wait_is_an_error(acl):
    src = np.arange(4, dtype=np.int64)
    out = np.zeros_like(src)
    stream, device = make(acl, src.nbytes)
    assert acl.aclrtMemcpyAsync(device, src.nbytes, src.ctypes.data, src.nbytes, HOST_TO_DEVICE, stream) == 0
    assert acl.aclrtMemcpy(out.ctypes.data, out.nbytes, device, src.nbytes, DEVICE_TO_HOST) == STREAM_HAZARD
    message = acl.aclGetRecentErrMsg().decode()
    assert "aclrtMemcpyAsync queued on stream" in message and "synchronize the stream first" in message
    assert acl.aclrtSynchronizeStream(stream) == 0
    assert acl.aclrtMemcpy(out.ctypes.data, out.nbytes, device, src.nbytes, DEVICE_TO_HOST) == 0
    np.testing.assert_array_equal(out, src)
    assert (acl.aclrtFree(device), acl.aclrtDestroyStream(stream)) == (0, 0)


def test_freeing_memory_queued_work_uses_is_an_error_and_fails_the_wait(acl):
    src = np.ones(8, dtype=np.float32)
    stream, device = make(acl, src.nbytes)
    assert acl.aclrtMemcpyAsync(device, src.nbytes, src.ctypes.data, src.nbytes, HOST_TO_DEVICE, stream) == 0
    assert acl.aclrtFree(device) == STREAM_HAZARD
    assert "still used by aclrtMemcpyAsync" in acl.aclGetRecentErrMsg().decode()
    assert acl.aclrtSynchronizeStream(stream) == KERNEL_FAILED
    assert "aclrtFree of" in acl.aclGetRecentErrMsg().decode()
    assert acl.aclrtFree(device) == 0  # once the work ran, the memory may go
    assert acl.aclrtDestroyStream(stream) == 0


@pytest.mark.parametrize("destroy_first", [False, True])
def test_a_stream_waiting_on_an_event_runs_after_the_recorded_work(acl, destroy_first):
    src = np.arange(8, dtype=np.float32)
    out = np.zeros_like(src)
    producer, device = make(acl, src.nbytes)
    consumer, event = ctypes.c_void_p(), ctypes.c_void_p()
    assert (acl.aclrtCreateStream(ctypes.byref(consumer)), acl.aclrtCreateEvent(ctypes.byref(event))) == (
        0,
        0,
    )
    assert (
        acl.aclrtMemcpyAsync(device, src.nbytes, src.ctypes.data, src.nbytes, HOST_TO_DEVICE, producer) == 0
    )
    assert acl.aclrtRecordEvent(event, producer) == 0
    assert acl.aclrtStreamWaitEvent(consumer, event) == 0
    assert (
        acl.aclrtMemcpyAsync(out.ctypes.data, out.nbytes, device, src.nbytes, DEVICE_TO_HOST, consumer) == 0
    )
    if destroy_first:  # destroying the producer runs its work, so the wait has nothing left
        assert acl.aclrtDestroyStream(producer) == 0
    assert acl.aclrtSynchronizeStream(consumer) == 0
    np.testing.assert_array_equal(out, src)
    assert acl.aclrtDestroyEvent(event) == 0
    assert (acl.aclrtFree(device), acl.aclrtDestroyStream(consumer)) == (0, 0)
    if not destroy_first:
        assert acl.aclrtDestroyStream(producer) == 0


def test_fresh_device_memory_is_poisoned(acl):
    stream, device = make(acl, 16)
    out = np.zeros(4, dtype=np.float32)
    assert acl.aclrtMemcpy(out.ctypes.data, out.nbytes, device, out.nbytes, DEVICE_TO_HOST) == 0
    assert np.isnan(out).all()
    assert (acl.aclrtFree(device), acl.aclrtDestroyStream(stream)) == (0, 0)


def test_a_destroyed_stream_is_refused(acl):
    stream, device = make(acl, 16)
    assert acl.aclrtDestroyStream(stream) == 0
    assert acl.aclrtMemsetAsync(device, 16, 0, 16, stream) == 100000
    assert acl.aclrtSynchronizeStream(stream) == 100000
    assert acl.aclrtFree(device) == 0


def test_the_emulator_home_serves_the_cann_ep():
    """Every library the CANN execution provider links is there."""
    lib64 = aclnn_emulator.home() + "/lib64"
    for name in ("libascendcl.so", "libacl_op_compiler.so", "libfmk_onnx_parser.so"):
        ctypes.CDLL(f"{lib64}/{name}")
