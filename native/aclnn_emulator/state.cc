// libascendcl.so: the runtime calls the backend makes, the control API, and the state every
// other emulator library shares through aclemu_hooks().
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "runtime.h"

namespace {

constexpr const char* kDefaultSoc = "Ascend910B2";

struct Injected {
  aclnnStatus code;
  std::string message;
};

struct State {
  std::mutex mu;
  std::unordered_map<std::string, int64_t> calls;
  std::unordered_map<std::string, int64_t> calls_by_library;  // "<library file name>:<symbol>"
  std::unordered_map<std::string, Injected> failures;
  std::unordered_set<const void*> live[static_cast<int>(aclemu::Kind::kCount)];
  std::unordered_map<const aclTensor*, int> pins;  // tensors queued work still reads or writes
  std::unordered_set<const aclTensor*> doomed;    // destroyed while pinned
  uint64_t workspace_override = 0;
  std::string soc = kDefaultSoc;
  std::unordered_map<std::string, int64_t> collective_bytes;  // by HCCL symbol, since the last reset
};

// Leaked on purpose: other libraries may still call in while the process exits.
State& state() {
  static State* s = new State;
  return *s;
}

// The vendor keeps the message per thread and hands it out once.
thread_local std::string pending_error;
thread_local std::string returned_error;
thread_local std::string returned_soc;

std::unordered_set<const void*>& live(aclemu::Kind kind) { return state().live[static_cast<int>(kind)]; }

aclnnStatus enter(const char* symbol) {
  Injected injected{0, {}};
  {
    std::lock_guard<std::mutex> lock(state().mu);
    ++state().calls[symbol];
    auto it = state().failures.find(symbol);
    if (it == state().failures.end()) return 0;
    injected = it->second;
  }
  pending_error = injected.message;
  return injected.code;
}

void set_error(const std::string& message) { pending_error = message; }

uint64_t workspace_override() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().workspace_override;
}

std::string soc() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().soc;
}

void add_live(aclemu::Kind kind, const void* object) {
  std::lock_guard<std::mutex> lock(state().mu);
  live(kind).insert(object);
}

bool remove_live(aclemu::Kind kind, const void* object) {
  std::lock_guard<std::mutex> lock(state().mu);
  return live(kind).erase(object) == 1;
}

bool is_live(aclemu::Kind kind, const void* object) {
  std::lock_guard<std::mutex> lock(state().mu);
  return live(kind).count(object) == 1;
}

void count_caller(const char* symbol, const void* return_address) {
  Dl_info info{};
  const char* path = dladdr(return_address, &info) != 0 && info.dli_fname ? info.dli_fname : "";
  const char* file = std::strrchr(path, '/');
  const std::string key = std::string(file ? file + 1 : path) + ":" + symbol;
  std::lock_guard<std::mutex> lock(state().mu);
  ++state().calls_by_library[key];
}

void pin(const aclTensor* tensor) {
  std::lock_guard<std::mutex> lock(state().mu);
  ++state().pins[tensor];
}

bool defer_delete(const aclTensor* tensor) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (state().pins.count(tensor) == 0) return false;
  state().doomed.insert(tensor);
  return true;
}

bool unpin(const aclTensor* tensor) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (--state().pins[tensor] > 0) return false;
  state().pins.erase(tensor);
  return state().doomed.erase(tensor) == 1;
}

void add_collective_bytes(const char* symbol, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().collective_bytes[symbol] += static_cast<int64_t>(bytes);
}

const aclemu::Hooks kHooks{enter,        set_error,    workspace_override,
                           soc,          add_live,     remove_live,
                           is_live,      aclemu::enqueue, aclemu::host_read_hazard,
                           count_caller, pin,          defer_delete,
                           unpin,        add_collective_bytes};

}  // namespace

ACLEMU_API const aclemu::Hooks* aclemu_hooks(void) { return &kHooks; }

ACLEMU_API const char* aclGetRecentErrMsg(void) {
  if (enter("aclGetRecentErrMsg") != 0) return nullptr;
  // NULL when nothing failed: the CANN EP takes any message after a kernel as its failure.
  if (pending_error.empty()) return nullptr;
  returned_error = std::move(pending_error);
  pending_error.clear();
  return returned_error.c_str();
}

ACLEMU_API const char* aclrtGetSocName(void) {
  if (enter("aclrtGetSocName") != 0) return nullptr;
  returned_soc = soc();
  return returned_soc.c_str();
}

ACLEMU_API void aclemu_reset(void) {
  aclemu::reset_runtime();
  {
    std::lock_guard<std::mutex> lock(state().mu);
    state().calls.clear();
    state().calls_by_library.clear();
    state().failures.clear();
    state().workspace_override = 0;
    state().soc = kDefaultSoc;
    state().collective_bytes.clear();
  }
  pending_error.clear();
}

ACLEMU_API void aclemu_fail(const char* symbol, int32_t code, const char* message) {
  if (symbol == nullptr) return;
  std::lock_guard<std::mutex> lock(state().mu);
  if (code == 0) {
    state().failures.erase(symbol);
    return;
  }
  std::string text = message != nullptr ? message : std::string(symbol) + ": failure injected by aclemu_fail";
  state().failures[symbol] = Injected{code, std::move(text)};
}

ACLEMU_API void aclemu_set_workspace_size(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().workspace_override = bytes;
}

ACLEMU_API int64_t aclemu_calls(const char* symbol) {
  if (symbol == nullptr) return 0;
  std::lock_guard<std::mutex> lock(state().mu);
  auto it = state().calls.find(symbol);
  return it == state().calls.end() ? 0 : it->second;
}

ACLEMU_API int64_t aclemu_calls_from(const char* symbol, const char* library) {
  if (symbol == nullptr || library == nullptr) return 0;
  std::lock_guard<std::mutex> lock(state().mu);
  int64_t total = 0;
  for (const auto& [key, count] : state().calls_by_library) {
    const size_t colon = key.rfind(':');
    if (key.compare(colon + 1, std::string::npos, symbol) == 0 && key.rfind(library, 0) == 0) total += count;
  }
  return total;
}

// aclIntArrays, aclTensorLists and aclScalars count with the aclTensors: all are descriptors the
// caller must destroy.
ACLEMU_API int64_t aclemu_live_tensors(void) {
  std::lock_guard<std::mutex> lock(state().mu);
  return static_cast<int64_t>(live(aclemu::Kind::kTensor).size() + live(aclemu::Kind::kIntArray).size() +
                              live(aclemu::Kind::kTensorList).size() + live(aclemu::Kind::kScalar).size());
}

ACLEMU_API int64_t aclemu_live_executors(void) {
  std::lock_guard<std::mutex> lock(state().mu);
  return static_cast<int64_t>(live(aclemu::Kind::kExecutor).size());
}

ACLEMU_API int64_t aclemu_collective_bytes(const char* symbol) {
  static constexpr const char* kCollectives[] = {"HcclAllReduce", "HcclReduceScatter", "HcclAllGather",
                                                 "HcclBroadcast", "HcclBarrier"};
  if (symbol == nullptr) return -1;
  if (std::none_of(std::begin(kCollectives), std::end(kCollectives),
                   [symbol](const char* c) { return std::strcmp(c, symbol) == 0; }))
    return -1;
  std::lock_guard<std::mutex> lock(state().mu);
  const auto it = state().collective_bytes.find(symbol);
  return it == state().collective_bytes.end() ? 0 : it->second;
}

ACLEMU_API void aclemu_set_soc(const char* name) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().soc = name != nullptr ? name : kDefaultSoc;
}

// The definitions above must keep the ABI the backend binds.
static_assert(std::is_same_v<decltype(&aclGetRecentErrMsg), oao::acl::GetRecentErrMsg>);
static_assert(std::is_same_v<decltype(&aclrtGetSocName), oao::acl::GetSocName>);
