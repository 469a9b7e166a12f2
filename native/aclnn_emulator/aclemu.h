// Control API of the aclnn host emulator, exported by its libascendcl.so. Tests drive it through
// ctypes or by including this header; nothing in the package itself calls it.
// The environment variable ACLEMU_DEVICE_COUNT (an integer in 1..64, default 1; read at each call)
// sets how many devices aclrtGetDeviceCount reports and aclrtSetDevice accepts, so that each rank
// of a data-parallel group (libhccl.so) can set its own.
#pragma once

#include <stdint.h>

#define ACLEMU_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

// Clears injected failures, call counters, copy and collective byte counters, the workspace
// override, the device memory size (back to unlimited) and the SoC name (back to "Ascend910B2"),
// and the calling thread's pending error message; the device memory peak restarts from the bytes
// live now. Live objects and allocations stay counted.
ACLEMU_EXPORT void aclemu_reset(void);
// From now until reset, every call of the exported `symbol` fails at its start with `code`, sets
// `message` as the recent error and creates nothing. Functions that return a pointer return NULL;
// a second phase still frees its executor. code 0 removes the injection.
ACLEMU_EXPORT void aclemu_fail(const char* symbol, int32_t code, const char* message);
// Workspace size every first phase reports; 0 restores the default.
ACLEMU_EXPORT void aclemu_set_workspace_size(uint64_t bytes);
// Calls of an emulated ACL symbol since the last reset. The old custom package's two functions
// count under "libcust_opapi:aclnnLightningIndexerGetWorkspaceSize" and
// "libcust_opapi:aclnnLightningIndexer". A first phase that accepts its arguments counts again
// under "<symbol>@<its first input's element type>" ("aclnnRmsNormGetWorkspaceSize@BFLOAT16").
ACLEMU_EXPORT int64_t aclemu_calls(const char* symbol);
// Calls of `symbol` made from a library whose file name starts with `library` (counted for
// aclrtSynchronizeStream, which the CANN execution provider also calls once per run).
ACLEMU_EXPORT int64_t aclemu_calls_from(const char* symbol, const char* library);
// aclTensors and aclIntArrays not destroyed yet.
ACLEMU_EXPORT int64_t aclemu_live_tensors(void);
ACLEMU_EXPORT int64_t aclemu_live_executors(void);
// What aclrtGetSocName returns and which product's rules the ops apply (by prefix: Ascend910B<digit>
// A2, Ascend910_93 A3, Ascend950 950, Ascend310P Atlas inference, else unsupported); "" reports no
// name while the ops keep the A2 rules; NULL restores the default.
ACLEMU_EXPORT void aclemu_set_soc(const char* name);
// Bytes aclrtMemcpy and aclrtMemcpyAsync copied in `direction` ("H2H", "H2D", "D2H" or "D2D") since
// the last reset; -1 for any other direction. The direction is where src and dst lie (inside a live
// aclrtMalloc allocation: device; anything else, aclrtMallocHost's memory included: host), whatever
// kind the caller passed. An async copy counts when its stream accepts it; a refused copy never.
ACLEMU_EXPORT int64_t aclemu_copied_bytes(const char* direction);
// Device bytes live now, and the most live at once since the last reset; as requested, not rounded
// up as the vendor's aclrtMalloc rounds them.
ACLEMU_EXPORT int64_t aclemu_device_bytes(void);
ACLEMU_EXPORT int64_t aclemu_device_bytes_peak(void);
// The device's memory size: an aclrtMalloc that would take the live device bytes past it fails with
// ACL_ERROR_RT_MEMORY_ALLOCATION (207001), and aclrtGetMemInfo reports it as the total. 0 (the
// default) is unlimited, reported as 64 GiB.
ACLEMU_EXPORT void aclemu_set_device_memory(uint64_t bytes);
// The bytes of the last aclrtMalloc refused since the last reset (past the size set, or failed by
// aclemu_fail; 0: none), which the CANN EP's error does not carry.
ACLEMU_EXPORT int64_t aclemu_refused_device_bytes(void);
// Bytes this process handed into the HCCL collective `symbol` ("HcclAllReduce",
// "HcclReduceScatter", "HcclAllGather", "HcclBroadcast" or "HcclBarrier") since the last reset; -1
// for any other symbol. A call counts when its work is queued, a refused call never: AllReduce
// count * item size, ReduceScatter nRanks * recvCount * item size (its whole sendBuf), AllGather
// sendCount * item size, Broadcast count * item size on every rank (root or not), Barrier 0.
ACLEMU_EXPORT int64_t aclemu_collective_bytes(const char* symbol);

#ifdef __cplusplus
}
#endif
