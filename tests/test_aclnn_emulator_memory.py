"""The emulated runtime's memory accounting: bytes copied by direction, the device memory live and
its peak, and a device memory size that makes aclrtMalloc run out as the vendor's does. Each test
starts and ends with aclemu_reset (the ``emulator`` fixture), since the library state is per process."""

import ctypes

import numpy as np
import pytest

HOST_TO_HOST, HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE, DEFAULT = range(5)
INVALID_PARAM, MEMORY_ALLOCATION = 100000, 207001  # ACL_ERROR_RT_MEMORY_ALLOCATION
DIRECTIONS = ("H2H", "H2D", "D2H", "D2D")
UNLIMITED = 64 << 30
P = ctypes.c_void_p


@pytest.fixture
def acl(emulator):
    lib = emulator
    size_p = ctypes.POINTER(ctypes.c_size_t)
    copy = [P, ctypes.c_size_t, P, ctypes.c_size_t, ctypes.c_int]
    for name, *args in [
        ("aclrtMalloc", ctypes.POINTER(P), ctypes.c_size_t, ctypes.c_int),
        ("aclrtFree", P),
        ("aclrtMallocHost", ctypes.POINTER(P), ctypes.c_size_t),
        ("aclrtFreeHost", P),
        ("aclrtGetMemInfo", ctypes.c_int, size_p, size_p),
        ("aclrtCreateStream", ctypes.POINTER(P)),
        ("aclrtDestroyStream", P),
        ("aclrtSynchronizeStream", P),
        ("aclrtMemcpy", *copy),
        ("aclrtMemcpyAsync", *copy, P),
    ]:
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = ctypes.c_int, args
    lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
    return lib


@pytest.fixture
def live(acl):
    """Device bytes other tests' sessions in this process may still hold; the figures below are
    relative to them."""
    return acl.aclemu_device_bytes()


def malloc(acl, size):
    ptr = P()
    assert acl.aclrtMalloc(ctypes.byref(ptr), size, 0) == 0
    return ptr


def copied(acl):
    return {d: acl.aclemu_copied_bytes(d.encode()) for d in DIRECTIONS}


def mem_info(acl):
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert acl.aclrtGetMemInfo(1, ctypes.byref(free), ctypes.byref(total)) == 0  # ACL_HBM_MEM
    return free.value, total.value


def test_sync_copies_count_by_where_the_bytes_lie_not_by_kind(acl):
    a, b = malloc(acl, 64), malloc(acl, 64)
    pinned = P()
    assert acl.aclrtMallocHost(ctypes.byref(pinned), 64) == 0
    host = np.zeros(64, dtype=np.uint8)
    assert copied(acl) == dict.fromkeys(DIRECTIONS, 0)
    # DEFAULT leaves the direction to the runtime; a pointer inside an allocation is still device.
    assert acl.aclrtMemcpy(a, 64, host.ctypes.data, 16, DEFAULT) == 0
    assert acl.aclrtMemcpy(a.value + 16, 48, host.ctypes.data, 8, HOST_TO_DEVICE) == 0
    assert acl.aclrtMemcpy(host.ctypes.data, 64, a.value + 8, 12, DEFAULT) == 0
    assert acl.aclrtMemcpy(b, 64, a, 32, DEVICE_TO_DEVICE) == 0
    # Pinned host memory is host memory, whatever the caller says it is.
    assert acl.aclrtMemcpy(pinned, 64, host.ctypes.data, 24, HOST_TO_DEVICE) == 0
    assert acl.aclrtMemcpy(b, 64, pinned, 4, DEFAULT) == 0
    assert acl.aclrtMemcpy(host.ctypes.data, 64, host.ctypes.data + 32, 0, DEFAULT) == 0  # empty
    assert copied(acl) == {"H2H": 24, "H2D": 16 + 8 + 4, "D2H": 12, "D2D": 32}
    assert (acl.aclrtFree(a), acl.aclrtFree(b), acl.aclrtFreeHost(pinned)) == (0, 0, 0)
    # Freed device memory is no longer device memory.
    assert acl.aclrtMemcpy(host.ctypes.data, 64, host.ctypes.data + 32, 5, DEFAULT) == 0
    assert copied(acl)["H2H"] == 29


def test_async_copies_count_when_submitted(acl):
    src = np.arange(16, dtype=np.float32)
    out = np.zeros_like(src)
    a, b = malloc(acl, src.nbytes), malloc(acl, src.nbytes)
    stream = P()
    assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0
    assert acl.aclrtMemcpyAsync(a, src.nbytes, src.ctypes.data, src.nbytes, DEFAULT, stream) == 0
    assert acl.aclrtMemcpyAsync(b, src.nbytes, a, 40, DEVICE_TO_DEVICE, stream) == 0
    assert acl.aclrtMemcpyAsync(out.ctypes.data, out.nbytes, b, 40, DEFAULT, stream) == 0
    assert copied(acl) == {"H2H": 0, "H2D": 64, "D2H": 40, "D2D": 40}
    assert acl.aclrtSynchronizeStream(stream) == 0
    np.testing.assert_array_equal(out[:10], src[:10])
    assert copied(acl) == {"H2H": 0, "H2D": 64, "D2H": 40, "D2D": 40}  # running them adds nothing
    assert (acl.aclrtFree(a), acl.aclrtFree(b), acl.aclrtDestroyStream(stream)) == (0, 0, 0)


def test_a_refused_copy_counts_nothing(acl):
    host = np.zeros(16, dtype=np.uint8)
    device = malloc(acl, 16)
    stream = P()
    assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0
    assert acl.aclrtMemcpy(device, 8, host.ctypes.data, 16, HOST_TO_DEVICE) == INVALID_PARAM  # > destMax
    assert acl.aclrtMemcpy(device, 16, host.ctypes.data, 16, 7) == INVALID_PARAM  # no such kind
    assert acl.aclrtMemcpyAsync(device, 8, host.ctypes.data, 16, HOST_TO_DEVICE, stream) == INVALID_PARAM
    # A sync read of what queued work still writes is refused; only the queued copy counts.
    assert acl.aclrtMemcpyAsync(device, 16, host.ctypes.data, 16, HOST_TO_DEVICE, stream) == 0
    assert acl.aclrtMemcpy(host.ctypes.data, 16, device, 16, DEVICE_TO_HOST) == 507000
    acl.aclGetRecentErrMsg()
    assert acl.aclrtSynchronizeStream(stream) == 0
    assert acl.aclrtDestroyStream(stream) == 0
    assert acl.aclrtMemcpyAsync(device, 16, host.ctypes.data, 16, HOST_TO_DEVICE, stream) == INVALID_PARAM
    assert copied(acl) == {"H2H": 0, "H2D": 16, "D2H": 0, "D2D": 0}
    assert acl.aclrtFree(device) == 0


def test_an_unknown_direction_is_minus_one(acl):
    for direction in (b"h2d", b"D2X", b"", b"H2D ", None):
        assert acl.aclemu_copied_bytes(direction) == -1


def test_the_peak_follows_malloc_free_and_reset(acl, live):
    def bytes_and_peak():
        return acl.aclemu_device_bytes() - live, acl.aclemu_device_bytes_peak() - live

    assert bytes_and_peak() == (0, 0)
    a, b = malloc(acl, 100), malloc(acl, 200)
    assert bytes_and_peak() == (300, 300)
    assert acl.aclrtFree(b) == 0
    c = malloc(acl, 50)
    assert bytes_and_peak() == (150, 300)
    # Pinned host memory is not device memory.
    pinned = P()
    assert acl.aclrtMallocHost(ctypes.byref(pinned), 1000) == 0
    assert bytes_and_peak() == (150, 300)
    acl.aclemu_reset()  # live allocations stay: the peak restarts from them
    assert bytes_and_peak() == (150, 150)
    d = malloc(acl, 10)
    assert acl.aclrtFree(a) == 0
    assert bytes_and_peak() == (60, 160)
    assert (acl.aclrtFree(c), acl.aclrtFree(d), acl.aclrtFreeHost(pinned)) == (0, 0, 0)
    assert bytes_and_peak() == (0, 160)


def test_the_device_memory_size_refuses_an_allocation_past_it(acl, live):
    size = live + 1000
    acl.aclemu_set_device_memory(size)
    a = malloc(acl, 600)
    assert mem_info(acl) == (400, size)
    refused = P()
    assert acl.aclrtMalloc(ctypes.byref(refused), 500, 0) == MEMORY_ALLOCATION
    assert refused.value is None
    message = f"aclrtMalloc: out of device memory: 500 bytes requested, 400 of {size} free"
    assert acl.aclGetRecentErrMsg().decode() == message
    assert (acl.aclemu_device_bytes(), acl.aclemu_device_bytes_peak()) == (live + 600, live + 600)
    b = malloc(acl, 400)  # exactly what is left
    assert mem_info(acl) == (0, size)
    assert acl.aclrtMalloc(ctypes.byref(refused), 1, 0) == MEMORY_ALLOCATION
    acl.aclGetRecentErrMsg()
    assert acl.aclrtFree(a) == 0
    c = malloc(acl, 500)  # fits again once memory is freed
    assert mem_info(acl) == (100, size)
    # Pinned host memory does not use device memory.
    pinned = P()
    assert acl.aclrtMallocHost(ctypes.byref(pinned), 5000) == 0
    assert (acl.aclrtFree(b), acl.aclrtFree(c), acl.aclrtFreeHost(pinned)) == (0, 0, 0)


def test_a_size_below_the_live_bytes_leaves_nothing_free(acl):
    a = malloc(acl, 300)
    acl.aclemu_set_device_memory(200)  # whatever else is live, 300 bytes are more
    refused = P()
    assert acl.aclrtMalloc(ctypes.byref(refused), 1, 0) == MEMORY_ALLOCATION
    assert acl.aclGetRecentErrMsg() == b"aclrtMalloc: out of device memory: 1 bytes requested, 0 of 200 free"
    assert mem_info(acl) == (0, 200)
    assert acl.aclrtFree(a) == 0


def test_zero_is_unlimited(acl, live):
    assert mem_info(acl) == (UNLIMITED - live, UNLIMITED)
    acl.aclemu_set_device_memory(live + 100)
    acl.aclemu_set_device_memory(0)
    a = malloc(acl, 4096)
    assert mem_info(acl) == (UNLIMITED - live - 4096, UNLIMITED)
    assert acl.aclrtFree(a) == 0


def test_get_mem_info_refuses_bad_arguments(acl):
    value = ctypes.c_size_t()
    assert acl.aclrtGetMemInfo(1, None, ctypes.byref(value)) == INVALID_PARAM
    assert acl.aclrtGetMemInfo(10, ctypes.byref(value), ctypes.byref(value)) == INVALID_PARAM
    acl.aclGetRecentErrMsg()


def test_reset_restores_everything(acl, live):
    host = np.zeros(64, dtype=np.uint8)
    a = malloc(acl, 64)
    acl.aclemu_set_device_memory(live + 100)
    assert acl.aclrtMemcpy(a, 64, host.ctypes.data, 64, HOST_TO_DEVICE) == 0
    assert acl.aclrtMemcpy(host.ctypes.data, 64, a, 64, DEVICE_TO_HOST) == 0
    assert acl.aclrtMemcpy(host.ctypes.data, 64, host.ctypes.data, 64, HOST_TO_HOST) == 0
    assert acl.aclrtFree(a) == 0
    acl.aclemu_reset()
    assert copied(acl) == dict.fromkeys(DIRECTIONS, 0)
    assert (acl.aclemu_device_bytes(), acl.aclemu_device_bytes_peak()) == (live, live)
    assert mem_info(acl) == (UNLIMITED - live, UNLIMITED)
    b = malloc(acl, 1000)  # past the size set before the reset
    assert acl.aclrtFree(b) == 0
