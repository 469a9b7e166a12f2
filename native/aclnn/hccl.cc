#include "aclnn/hccl.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>

#include "aclnn/cann.h"

namespace oao::hccl {
namespace {

using CreateEvent = aclError (*)(aclrtEvent* event);
using DestroyEvent = aclError (*)(aclrtEvent event);

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}

// Leaked on purpose: a node may still look a group up while the process exits.
std::map<std::string, Group>& registry() {
  static auto* groups = new std::map<std::string, Group>;
  return *groups;
}

}  // namespace

Group group(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const auto it = registry().find(name);
  if (it == registry().end())
    throw std::runtime_error("no HCCL communicator is registered as '" + name +
                             "' in this process (training.api.hccl.Communicator registers one)");
  return it->second;
}

}  // namespace oao::hccl

// The Python side's entry points (ctypes), beside RegisterCustomOps: 0, or a nonzero code with
// the reason in `error` (NUL-terminated, at most `error_size` bytes).
extern "C" __attribute__((visibility("default"))) int OrtAscendOps_RegisterHcclGroup(
    const char* name, void* comm, void* stream, char* error, size_t error_size) {
  using namespace oao::hccl;
  try {
    const auto& cann = oao::acl::Cann::get();
    aclrtEvent ready = nullptr;
    if (const aclError code = cann.base<CreateEvent>("aclrtCreateEvent")(&ready); code != 0)
      throw std::runtime_error("aclrtCreateEvent failed with " + std::to_string(code));
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto& groups = registry();
    if (const auto it = groups.find(name); it != groups.end())
      cann.base<DestroyEvent>("aclrtDestroyEvent")(it->second.ready);
    groups[name] = Group{comm, stream, ready};
    return 0;
  } catch (const std::exception& e) {
    if (error_size > 0) std::snprintf(error, error_size, "%s", e.what());
    return 1;
  }
}

extern "C" __attribute__((visibility("default"))) void OrtAscendOps_UnregisterHcclGroup(const char* name) {
  using namespace oao::hccl;
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& groups = registry();
  if (const auto it = groups.find(name); it != groups.end()) {
    oao::acl::Cann::get().base<DestroyEvent>("aclrtDestroyEvent")(it->second.ready);
    groups.erase(it);
  }
}
