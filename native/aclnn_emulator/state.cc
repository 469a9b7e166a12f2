// libascendcl.so: the runtime calls the backend makes, the control API, and the state every
// other emulator library shares through aclemu_hooks().
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "emulator.h"

namespace {

constexpr const char* kDefaultSoc = "Ascend910B2";
constexpr aclError kAclErrorInvalidParam = 100000;  // ACL_ERROR_INVALID_PARAM

struct Injected {
  aclnnStatus code;
  std::string message;
};

struct State {
  std::mutex mu;
  std::unordered_map<std::string, int64_t> calls;
  std::unordered_map<std::string, Injected> failures;
  std::unordered_set<const void*> live[2];
  uint64_t workspace_override = 0;
  std::string soc = kDefaultSoc;
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

const aclemu::Hooks kHooks{enter, set_error, workspace_override, soc, add_live, remove_live, is_live};

void runtime_error(const char* symbol, const std::string& rule) {
  pending_error = std::string(symbol) + ": " + rule;
}

}  // namespace

ACLEMU_API const aclemu::Hooks* aclemu_hooks(void) { return &kHooks; }

ACLEMU_API const char* aclGetRecentErrMsg(void) {
  if (enter("aclGetRecentErrMsg") != 0) return nullptr;
  returned_error = std::move(pending_error);
  pending_error.clear();
  return returned_error.c_str();
}

ACLEMU_API const char* aclrtGetSocName(void) {
  if (enter("aclrtGetSocName") != 0) return nullptr;
  returned_soc = soc();
  return returned_soc.c_str();
}

ACLEMU_API aclError aclrtSynchronizeStream(aclrtStream) {
  // Every launch already ran to completion on the calling thread.
  return enter("aclrtSynchronizeStream");
}

ACLEMU_API aclError aclrtMemcpy(void* dst, size_t dest_max, const void* src, size_t count, int kind) {
  constexpr const char* kSymbol = "aclrtMemcpy";
  if (aclError injected = enter(kSymbol)) return injected;
  if (dst == nullptr || src == nullptr) {
    runtime_error(kSymbol, "dst and src must not be NULL");
    return kAclErrorInvalidParam;
  }
  if (count > dest_max) {
    runtime_error(kSymbol, "count " + std::to_string(count) + " exceeds destMax " + std::to_string(dest_max));
    return kAclErrorInvalidParam;
  }
  if (kind < 0 || kind > 4) {  // HOST_TO_HOST .. DEFAULT
    runtime_error(kSymbol, "unknown aclrtMemcpyKind " + std::to_string(kind));
    return kAclErrorInvalidParam;
  }
  std::memmove(dst, src, count);
  return 0;
}

ACLEMU_API void aclemu_reset(void) {
  {
    std::lock_guard<std::mutex> lock(state().mu);
    state().calls.clear();
    state().failures.clear();
    state().workspace_override = 0;
    state().soc = kDefaultSoc;
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

ACLEMU_API int64_t aclemu_live_tensors(void) {
  std::lock_guard<std::mutex> lock(state().mu);
  return static_cast<int64_t>(live(aclemu::Kind::kTensor).size());
}

ACLEMU_API int64_t aclemu_live_executors(void) {
  std::lock_guard<std::mutex> lock(state().mu);
  return static_cast<int64_t>(live(aclemu::Kind::kExecutor).size());
}

ACLEMU_API void aclemu_set_soc(const char* name) {
  std::lock_guard<std::mutex> lock(state().mu);
  state().soc = name != nullptr ? name : kDefaultSoc;
}

// The definitions above must keep the ABI the backend binds.
static_assert(std::is_same_v<decltype(&aclGetRecentErrMsg), oao::acl::GetRecentErrMsg>);
static_assert(std::is_same_v<decltype(&aclrtGetSocName), oao::acl::GetSocName>);
static_assert(std::is_same_v<decltype(&aclrtSynchronizeStream), oao::acl::SynchronizeStream>);
static_assert(std::is_same_v<decltype(&aclrtMemcpy), oao::acl::MemcpyDeviceToHost>);
