// libascendcl.so, the runtime: emulated devices whose memory is host memory, streams that keep
// their work until the host waits for it, events, and copies. Work never runs when it is submitted,
// so a caller that reads a device value on the host, or frees memory, before waiting for the work
// that uses it gets an error instead of a result that happens to be right.
#include "runtime.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_set>

#include "op.h"

namespace {

using aclemu::hooks;
using aclemu::Range;
using aclemu::Work;

// aclError values of CANN's acl_base.h and rt error codes.
constexpr aclError kAclSuccess = 0;
constexpr aclError kInvalidParam = 100000;      // ACL_ERROR_INVALID_PARAM
constexpr aclError kUninitialized = 100001;     // ACL_ERROR_UNINITIALIZE
constexpr aclError kRepeatInitialize = 100002;  // ACL_ERROR_REPEAT_INITIALIZE
constexpr aclError kBadAlloc = 200000;          // ACL_ERROR_BAD_ALLOC
constexpr aclError kOutOfMemory = 207001;       // ACL_ERROR_RT_MEMORY_ALLOCATION
constexpr aclError kInvalidDevice = 107001;     // ACL_ERROR_RT_INVALID_DEVICEID
constexpr aclError kContextNull = 107002;       // ACL_ERROR_RT_CONTEXT_NULL
constexpr aclError kInternal = 507000;          // ACL_ERROR_RT_INTERNAL_ERROR
constexpr aclError kKernelFailed = 507015;      // ACL_ERROR_RT_AICORE_EXCEPTION

// ACLEMU_DEVICE_COUNT devices (default 1), so that each rank of a data-parallel group, a process
// of its own, can set its own: they share the process's one memory and set of streams.
constexpr const char* kDeviceCountEnv = "ACLEMU_DEVICE_COUNT";
constexpr long kMostDevices = 64;
constexpr size_t kAlignment = 64;
// Fresh device memory reads as NaN / -1, never as plausible data.
constexpr unsigned char kPoison = 0xFF;
constexpr int kMemcpyKinds = 5;  // HOST_TO_HOST .. DEFAULT
constexpr int kMemAttrs = 10;    // aclrtMemAttr: ACL_DDR_MEM .. ACL_HBM_MEM_P2P_NORMAL
// What aclrtGetMemInfo reports as the device's memory while aclemu_set_device_memory sets no size.
constexpr size_t kUnlimitedDeviceMemory = size_t{64} << 30;
// aclemu_copied_bytes' directions, indexed (src on device) * 2 + (dst on device) as aclrtMemcpyKind
// numbers them.
constexpr const char* kDirections[] = {"H2H", "H2D", "D2H", "D2D"};

struct Stream {
  std::deque<Work> queue;
  uint64_t submitted = 0, completed = 0;
  std::string fault;  // the first failure since the last wait, reported by the next one
};

struct Event {
  Stream* stream = nullptr;  // null: never recorded, complete
  uint64_t ticket = 0;       // complete once the stream has completed this much work
};

struct Runtime {
  // Recursive: a stream waiting for an event runs another stream's work from inside a wait.
  std::recursive_mutex mu;
  bool initialized = false;
  std::map<const char*, size_t> device, host;  // allocations: start -> bytes
  // Device bytes as requested (not rounded), so tests can state them exactly.
  size_t device_live = 0, device_peak = 0;
  size_t device_limit = 0;                      // 0: unlimited
  size_t device_refused = 0;                    // the last allocation past the limit, since the last reset
  int64_t copied[std::size(kDirections)] = {};  // bytes by direction, since the last reset
  Stream default_stream;
  std::unordered_set<Stream*> streams;
  std::unordered_set<Event*> events;
};

// Leaked on purpose, like the shared state: the EP may free memory while the process exits.
Runtime& rt() {
  static Runtime* r = new Runtime;
  return *r;
}

thread_local int32_t current_device = -1;

aclError refuse(const char* symbol, aclError code, const std::string& rule) {
  hooks().set_error(std::string(symbol) + ": " + rule);
  return code;
}

// Read at every call, so a test may change it between calls; 0 (message set) when it is malformed.
uint32_t device_count(const char* symbol) {
  const char* text = std::getenv(kDeviceCountEnv);
  if (text == nullptr || *text == '\0') return 1;
  char* end = nullptr;
  errno = 0;
  const long count = std::strtol(text, &end, 10);
  if (*end == '\0' && errno == 0 && count >= 1 && count <= kMostDevices) return static_cast<uint32_t>(count);
  refuse(symbol, kInvalidDevice,
         std::string(kDeviceCountEnv) + "=" + text + " is not an integer in 1.." +
             std::to_string(kMostDevices));
  return 0;
}

bool overlaps(const Range& a, const Range& b) {
  const auto* a0 = static_cast<const char*>(a.begin);
  const auto* b0 = static_cast<const char*>(b.begin);
  return a.bytes > 0 && b.bytes > 0 && a0 < b0 + b.bytes && b0 < a0 + a.bytes;
}

std::string range_text(const Range& r) {
  char text[64];
  std::snprintf(text, sizeof text, "[%p, +%zu)", r.begin, r.bytes);
  return text;
}

std::vector<Stream*> all_streams() {
  std::vector<Stream*> out{&rt().default_stream};
  out.insert(out.end(), rt().streams.begin(), rt().streams.end());
  return out;
}

// The work queued on `s` that writes (or, with `reads`, also reads) `range`, as "<what> queued on
// stream S"; empty if none.
std::string stream_use(const Stream* s, const Range& range, bool reads) {
  for (const Work& w : s->queue) {
    bool hit = false;
    for (const Range& r : w.writes) hit = hit || overlaps(r, range);
    for (const Range& r : w.reads) hit = hit || (reads && overlaps(r, range));
    if (hit) {
      char stream[32];
      std::snprintf(stream, sizeof stream, "%p", s == &rt().default_stream ? nullptr : static_cast<const void*>(s));
      return w.what + " queued on stream " + stream;
    }
  }
  return {};
}

std::string pending_use(const Range& range, bool reads) {
  for (Stream* s : all_streams()) {
    if (std::string use = stream_use(s, range, reads); !use.empty()) return use;
  }
  return {};
}

Stream* find_stream(aclrtStream handle) {
  if (handle == nullptr) return &rt().default_stream;
  auto* s = static_cast<Stream*>(handle);
  return rt().streams.count(s) ? s : nullptr;
}

// Runs `stream`'s work, oldest first, until `ticket` pieces have completed; reports the first
// failure since the last wait.
aclError drain(Stream& stream, uint64_t ticket, const char* symbol) {
  while (stream.completed < ticket && !stream.queue.empty()) {
    Work work = std::move(stream.queue.front());
    stream.queue.pop_front();
    try {
      work.run();
    } catch (const aclemu::Error& e) {
      if (stream.fault.empty())
        stream.fault = work.what + " failed with " + std::to_string(e.code) + ": " + e.message;
    } catch (const std::exception& e) {
      if (stream.fault.empty()) stream.fault = work.what + " failed: " + e.what();
    }
    ++stream.completed;
  }
  if (stream.fault.empty()) return kAclSuccess;
  const std::string fault = std::move(stream.fault);
  stream.fault.clear();
  return refuse(symbol, kKernelFailed, "the stream's work failed: " + fault);
}

aclError drain_all(Stream& stream, const char* symbol) { return drain(stream, stream.submitted, symbol); }

char* allocate(size_t bytes, bool poison) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  auto* p = static_cast<char*>(std::aligned_alloc(kAlignment, rounded));
  if (p != nullptr && poison) std::memset(p, kPoison, rounded);
  return p;
}

// Device memory starts poisoned; pinned host memory is the caller's to fill, as on the vendor's.
aclError allocate_tracked(const char* symbol, void** out, const char* out_name, size_t size, bool device) {
  if (out == nullptr) return refuse(symbol, kInvalidParam, std::string(out_name) + " is NULL");
  if (size == 0) return refuse(symbol, kInvalidParam, "size is 0");
  const char* kind = device ? "device" : "host";
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Runtime& r = rt();
  if (device && r.device_limit != 0) {
    // The limit may have been set below what is already live.
    const size_t available = r.device_live < r.device_limit ? r.device_limit - r.device_live : 0;
    if (size > available) {
      r.device_refused = size;
      return refuse(symbol, kOutOfMemory,
                    "out of device memory: " + std::to_string(size) + " bytes requested, " +
                        std::to_string(available) + " of " + std::to_string(r.device_limit) + " free");
    }
  }
  char* p = allocate(size, device);
  if (p == nullptr)
    return refuse(symbol, kBadAlloc, std::string("out of ") + kind + " memory for " + std::to_string(size) + " bytes");
  (device ? r.device : r.host)[p] = size;
  if (device) {
    r.device_live += size;
    r.device_peak = std::max(r.device_peak, r.device_live);
  }
  *out = p;
  return kAclSuccess;
}

aclError free_allocation(const char* symbol, std::map<const char*, size_t>& from, void* ptr, const char* kind) {
  const auto it = from.find(static_cast<const char*>(ptr));
  if (it == from.end()) return refuse(symbol, kInvalidParam, std::string("not a live ") + kind + " allocation");
  const Range whole{it->first, it->second};
  if (const std::string user = pending_use(whole, true); !user.empty()) {
    // Kept alive so the queued work stays defined; the stream's next wait reports it too.
    for (Stream* s : all_streams()) {
      const std::string use = stream_use(s, whole, true);
      if (s->fault.empty() && !use.empty())
        s->fault = std::string(symbol) + " of " + range_text(whole) + " while " + use + " still uses it";
    }
    return refuse(symbol, kInternal, range_text(whole) + " is still used by " + user + ": synchronize first");
  }
  std::free(ptr);
  if (&from == &rt().device) rt().device_live -= it->second;
  from.erase(it);
  return kAclSuccess;
}

// Whether `p` lies in a live device allocation: pinned host memory and the caller's own are host.
bool on_device(const void* p) {
  const auto* c = static_cast<const char*>(p);
  auto it = rt().device.upper_bound(c);
  if (it == rt().device.begin()) return false;
  --it;
  return c < it->first + it->second;
}

// By where the bytes really lie, not by the kind the caller passed (which may be DEFAULT).
void count_copy(void* dst, const void* src, size_t count) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  rt().copied[on_device(src) * 2 + on_device(dst)] += static_cast<int64_t>(count);
}

}  // namespace

namespace aclemu {

aclError enqueue(aclrtStream handle, Work work) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Stream* stream = find_stream(handle);
  if (stream == nullptr) return refuse(work.what.c_str(), kInvalidParam, "stream is not a live aclrtStream");
  stream->queue.push_back(std::move(work));
  ++stream->submitted;
  return kAclSuccess;
}

std::string host_read_hazard(const void* begin, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  const std::string writer = pending_use({begin, bytes}, false);
  return writer.empty() ? writer : range_text({begin, bytes}) + " is written by " + writer + " that has not run";
}

void reset_runtime() {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  for (Stream* s : all_streams()) drain_all(*s, "aclemu_reset");
  // Live allocations survive a reset, so the peak restarts from them rather than from 0.
  rt().device_peak = rt().device_live;
  rt().device_limit = 0;
  std::fill(std::begin(rt().copied), std::end(rt().copied), 0);
  rt().device_refused = 0;
}

}  // namespace aclemu

ACLEMU_API aclError aclInit(const char*) {
  if (aclError injected = hooks().enter("aclInit")) return injected;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  if (rt().initialized) return refuse("aclInit", kRepeatInitialize, "already initialized");
  rt().initialized = true;
  return kAclSuccess;
}

ACLEMU_API aclError aclFinalize(void) {
  if (aclError injected = hooks().enter("aclFinalize")) return injected;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  if (!rt().initialized) return refuse("aclFinalize", kUninitialized, "aclInit was not called");
  rt().initialized = false;
  return kAclSuccess;
}

ACLEMU_API aclError aclrtGetDeviceCount(uint32_t* count) {
  if (aclError injected = hooks().enter("aclrtGetDeviceCount")) return injected;
  if (count == nullptr) return refuse("aclrtGetDeviceCount", kInvalidParam, "count is NULL");
  const uint32_t devices = device_count("aclrtGetDeviceCount");
  if (devices == 0) return kInvalidDevice;
  *count = devices;
  return kAclSuccess;
}

ACLEMU_API aclError aclrtSetDevice(int32_t device_id) {
  if (aclError injected = hooks().enter("aclrtSetDevice")) return injected;
  const uint32_t devices = device_count("aclrtSetDevice");
  if (devices == 0) return kInvalidDevice;
  if (device_id < 0 || static_cast<uint32_t>(device_id) >= devices) {
    return refuse("aclrtSetDevice", kInvalidDevice,
                  "device " + std::to_string(device_id) + " does not exist (" + std::to_string(devices) +
                      " emulated; " + kDeviceCountEnv + " sets how many)");
  }
  current_device = device_id;
  return kAclSuccess;
}

ACLEMU_API aclError aclrtGetDevice(int32_t* device_id) {
  if (aclError injected = hooks().enter("aclrtGetDevice")) return injected;
  if (device_id == nullptr) return refuse("aclrtGetDevice", kInvalidParam, "deviceId is NULL");
  if (current_device < 0) return refuse("aclrtGetDevice", kContextNull, "no device set on this thread");
  *device_id = current_device;
  return kAclSuccess;
}

ACLEMU_API aclError aclrtMalloc(void** dev_ptr, size_t size, int /*aclrtMemMallocPolicy*/) {
  if (aclError injected = hooks().enter("aclrtMalloc")) {
    std::lock_guard<std::recursive_mutex> lock(rt().mu);
    rt().device_refused = size;
    return injected;
  }
  return allocate_tracked("aclrtMalloc", dev_ptr, "devPtr", size, true);
}

ACLEMU_API aclError aclrtFree(void* dev_ptr) {
  if (aclError injected = hooks().enter("aclrtFree")) return injected;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  return free_allocation("aclrtFree", rt().device, dev_ptr, "device");
}

ACLEMU_API aclError aclrtGetMemInfo(int attr /*aclrtMemAttr*/, size_t* free, size_t* total) {
  constexpr const char* kSymbol = "aclrtGetMemInfo";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  if (free == nullptr || total == nullptr)
    return refuse(kSymbol, kInvalidParam, "free and total must not be NULL");
  if (attr < 0 || attr >= kMemAttrs)
    return refuse(kSymbol, kInvalidParam, "unknown aclrtMemAttr " + std::to_string(attr));
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  // One kind of memory: every attribute reports the same.
  *total = rt().device_limit != 0 ? rt().device_limit : kUnlimitedDeviceMemory;
  *free = rt().device_live < *total ? *total - rt().device_live : 0;
  return kAclSuccess;
}

ACLEMU_API aclError aclrtMallocHost(void** host_ptr, size_t size) {
  if (aclError injected = hooks().enter("aclrtMallocHost")) return injected;
  return allocate_tracked("aclrtMallocHost", host_ptr, "hostPtr", size, false);
}

ACLEMU_API aclError aclrtFreeHost(void* host_ptr) {
  if (aclError injected = hooks().enter("aclrtFreeHost")) return injected;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  return free_allocation("aclrtFreeHost", rt().host, host_ptr, "pinned host");
}

ACLEMU_API aclError aclrtCreateStream(aclrtStream* stream) {
  if (aclError injected = hooks().enter("aclrtCreateStream")) return injected;
  if (stream == nullptr) return refuse("aclrtCreateStream", kInvalidParam, "stream is NULL");
  auto* s = new Stream;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  rt().streams.insert(s);
  *stream = s;
  return kAclSuccess;
}

ACLEMU_API aclError aclrtDestroyStream(aclrtStream stream) {
  constexpr const char* kSymbol = "aclrtDestroyStream";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Stream* s = stream == nullptr ? nullptr : find_stream(stream);
  if (s == nullptr) return refuse(kSymbol, kInvalidParam, "not a live aclrtStream");
  // The vendor runs what was queued before the stream goes.
  const aclError code = drain_all(*s, kSymbol);
  rt().streams.erase(s);
  for (Event* e : rt().events) {
    if (e->stream == s) e->stream = nullptr;
  }
  delete s;
  return code;
}

ACLEMU_API aclError aclrtSynchronizeStream(aclrtStream stream) {
  constexpr const char* kSymbol = "aclrtSynchronizeStream";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  hooks().count_caller(kSymbol, __builtin_return_address(0));
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Stream* s = find_stream(stream);
  if (s == nullptr) return refuse(kSymbol, kInvalidParam, "not a live aclrtStream");
  return drain_all(*s, kSymbol);
}

ACLEMU_API aclError aclrtSynchronizeDevice(void) {
  constexpr const char* kSymbol = "aclrtSynchronizeDevice";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  aclError first = kAclSuccess;
  for (Stream* s : all_streams()) {
    const aclError code = drain_all(*s, kSymbol);
    if (first == kAclSuccess) first = code;
  }
  return first;
}

ACLEMU_API aclError aclrtCreateEvent(aclrtEvent* event) {
  if (aclError injected = hooks().enter("aclrtCreateEvent")) return injected;
  if (event == nullptr) return refuse("aclrtCreateEvent", kInvalidParam, "event is NULL");
  auto* e = new Event;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  rt().events.insert(e);
  *event = e;
  return kAclSuccess;
}

namespace {

Event* find_event(aclrtEvent handle) {
  auto* e = static_cast<Event*>(handle);
  return rt().events.count(e) ? e : nullptr;
}

}  // namespace

ACLEMU_API aclError aclrtDestroyEvent(aclrtEvent event) {
  if (aclError injected = hooks().enter("aclrtDestroyEvent")) return injected;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Event* e = find_event(event);
  if (e == nullptr) return refuse("aclrtDestroyEvent", kInvalidParam, "not a live aclrtEvent");
  rt().events.erase(e);
  delete e;
  return kAclSuccess;
}

ACLEMU_API aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  constexpr const char* kSymbol = "aclrtRecordEvent";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Event* e = find_event(event);
  Stream* s = find_stream(stream);
  if (e == nullptr || s == nullptr) return refuse(kSymbol, kInvalidParam, "not a live event and stream");
  *e = Event{s, s->submitted};
  return kAclSuccess;
}

ACLEMU_API aclError aclrtSynchronizeEvent(aclrtEvent event) {
  constexpr const char* kSymbol = "aclrtSynchronizeEvent";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Event* e = find_event(event);
  if (e == nullptr) return refuse(kSymbol, kInvalidParam, "not a live aclrtEvent");
  return e->stream == nullptr ? kAclSuccess : drain(*e->stream, e->ticket, kSymbol);
}

ACLEMU_API aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  constexpr const char* kSymbol = "aclrtStreamWaitEvent";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  Event* e = find_event(event);
  Stream* s = find_stream(stream);
  if (e == nullptr || s == nullptr) return refuse(kSymbol, kInvalidParam, "not a live stream and event");
  if (e->stream == nullptr || e->stream == s) return kAclSuccess;  // nothing to wait for, or already in order
  const Event snapshot = *e;
  s->queue.push_back(Work{kSymbol, {}, {}, [snapshot] {
                            // A stream destroyed meanwhile ran all its work when it went.
                            Stream* awaited = rt().streams.count(snapshot.stream) ? snapshot.stream : nullptr;
                            if (awaited == nullptr) return;
                            const aclError code = drain(*awaited, snapshot.ticket, kSymbol);
                            if (code != kAclSuccess) aclemu::fail(code, "the awaited stream's work failed");
                          }});
  ++s->submitted;
  return kAclSuccess;
}

namespace {

aclError check_copy(const char* symbol, const void* dst, size_t dest_max, const void* src, size_t count,
                    int kind) {
  if (count == 0) return kAclSuccess;  // the EP's copies of empty tensors pass NULL
  if (dst == nullptr || src == nullptr) return refuse(symbol, kInvalidParam, "dst and src must not be NULL");
  if (count > dest_max)
    return refuse(symbol, kInvalidParam,
                  "count " + std::to_string(count) + " exceeds destMax " + std::to_string(dest_max));
  if (kind < 0 || kind >= kMemcpyKinds)
    return refuse(symbol, kInvalidParam, "unknown aclrtMemcpyKind " + std::to_string(kind));
  return kAclSuccess;
}

}  // namespace

ACLEMU_API aclError aclrtMemcpy(void* dst, size_t dest_max, const void* src, size_t count, int kind) {
  constexpr const char* kSymbol = "aclrtMemcpy";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  if (aclError code = check_copy(kSymbol, dst, dest_max, src, count, kind)) return code;
  if (count == 0) return kAclSuccess;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  // A synchronous copy does not wait for any stream.
  if (const std::string writer = pending_use({src, count}, false); !writer.empty())
    return refuse(kSymbol, kInternal, "src " + range_text({src, count}) + " is written by " + writer +
                                          " that has not run: synchronize the stream first");
  if (const std::string user = pending_use({dst, count}, true); !user.empty())
    return refuse(kSymbol, kInternal, "dst " + range_text({dst, count}) + " is used by " + user +
                                          " that has not run: synchronize the stream first");
  std::memmove(dst, src, count);
  count_copy(dst, src, count);
  return kAclSuccess;
}

ACLEMU_API aclError aclrtMemcpyAsync(void* dst, size_t dest_max, const void* src, size_t count, int kind,
                                     aclrtStream stream) {
  constexpr const char* kSymbol = "aclrtMemcpyAsync";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  if (aclError code = check_copy(kSymbol, dst, dest_max, src, count, kind)) return code;
  const aclError code =
      aclemu::enqueue(stream, Work{kSymbol, {{src, count}}, {{dst, count}}, [dst, src, count] {
                                     if (count > 0) std::memmove(dst, src, count);
                                   }});
  // Counted at submission, where the allocations the copy names are surely still live.
  if (code == kAclSuccess) count_copy(dst, src, count);
  return code;
}

ACLEMU_API aclError aclrtMemsetAsync(void* dev_ptr, size_t max_count, int32_t value, size_t count,
                                     aclrtStream stream) {
  constexpr const char* kSymbol = "aclrtMemsetAsync";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  if (count > max_count)
    return refuse(kSymbol, kInvalidParam,
                  "count " + std::to_string(count) + " exceeds maxCount " + std::to_string(max_count));
  if (dev_ptr == nullptr && count > 0) return refuse(kSymbol, kInvalidParam, "devPtr is NULL");
  return aclemu::enqueue(stream, Work{kSymbol, {}, {{dev_ptr, count}}, [dev_ptr, value, count] {
                                        if (count > 0) std::memset(dev_ptr, value, count);
                                      }});
}

ACLEMU_API int64_t aclemu_copied_bytes(const char* direction) {
  if (direction == nullptr) return -1;
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  for (size_t i = 0; i < std::size(kDirections); ++i) {
    if (std::strcmp(direction, kDirections[i]) == 0) return rt().copied[i];
  }
  return -1;
}

ACLEMU_API int64_t aclemu_device_bytes_peak(void) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  return static_cast<int64_t>(rt().device_peak);
}

ACLEMU_API int64_t aclemu_device_bytes(void) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  return static_cast<int64_t>(rt().device_live);
}

ACLEMU_API int64_t aclemu_refused_device_bytes(void) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  return static_cast<int64_t>(rt().device_refused);
}

ACLEMU_API void aclemu_set_device_memory(uint64_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(rt().mu);
  rt().device_limit = static_cast<size_t>(bytes);
}

// The definitions above must keep the ABI the backend binds.
static_assert(std::is_same_v<decltype(&aclrtSynchronizeStream), oao::acl::SynchronizeStream>);
static_assert(std::is_same_v<decltype(&aclrtMemcpy), oao::acl::Memcpy>);
static_assert(std::is_same_v<decltype(&aclrtMemcpyAsync), oao::acl::MemcpyAsync>);
