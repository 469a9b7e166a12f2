#include "aclnn/uploads.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace oao::uploads {

using GetDevice = aclError (*)(int32_t* device_id);
using Malloc = aclError (*)(void** dev_ptr, size_t size, int policy);
using Free = aclError (*)(void* dev_ptr);

struct Slot {
  void* device = nullptr;
  size_t bytes = 0;
  uint64_t bits = 0;
  int pins = 0;
  uint64_t used = 0;  // when last handed out, for choosing the slot to overwrite
};

namespace {

// A stream's distinct scalars in flight at once: a step number, a loss scale and its inverse, a
// found-inf seed, with room to spare. More pinned at once get slots of their own.
constexpr size_t kSlotsPerStream = 8;
constexpr size_t kSlotBytes = 8;

struct State {
  std::mutex mu;
  std::map<std::pair<int32_t, const void*>, const void*> constants;               // (device, host) -> device
  std::map<std::pair<int32_t, void*>, std::vector<std::unique_ptr<Slot>>> slots;  // by (device, stream)
  uint64_t clock = 0;
  int leases = 0;
  const acl::Cann* cann = nullptr;  // what allocated the uploads, to free them
};

// Leaked on purpose (Lease frees what it names): the EP may run kernels while the process exits.
State& state() {
  static State* s = new State;
  return *s;
}

bool current_device(const acl::Cann& cann, int32_t* device) {
  return cann.base<GetDevice>("aclrtGetDevice")(device) == 0;
}

void* allocate(State& s, const acl::Cann& cann, size_t bytes) {
  s.cann = &cann;
  void* device = nullptr;
  const aclError code = cann.base<Malloc>("aclrtMalloc")(&device, bytes, 0);
  if (code != 0) {
    throw std::runtime_error("could not allocate " + std::to_string(bytes) +
                             " bytes of device memory (aclrtMalloc " + std::to_string(code) + ")");
  }
  return device;
}

void upload(const acl::Cann& cann, void* device, const void* host, size_t bytes) {
  const aclError code =
      cann.base<acl::Memcpy>("aclrtMemcpy")(device, bytes, host, bytes, acl::kMemcpyHostToDevice);
  if (code != 0) {
    throw std::runtime_error("copying " + std::to_string(bytes) + " bytes to the device failed with " +
                             std::to_string(code));
  }
}

}  // namespace

const void* constant(const acl::Cann& cann, const std::vector<uint8_t>& host) {
  int32_t device = 0;
  if (!current_device(cann, &device)) return nullptr;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const auto key = std::make_pair(device, static_cast<const void*>(host.data()));
  if (auto found = s.constants.find(key); found != s.constants.end()) return found->second;
  void* data = allocate(s, cann, host.size());
  upload(cann, data, host.data(), host.size());  // fresh memory: no queued work reads it
  s.constants.emplace(key, data);
  return data;
}

Scalar scalar(const acl::Cann& cann, void* stream, const void* host, size_t bytes) {
  if (bytes > kSlotBytes) throw std::logic_error("uploads::scalar takes at most 8 bytes");
  int32_t device = 0;
  if (stream == nullptr || !current_device(cann, &device)) return {};
  uint64_t bits = 0;
  std::memcpy(&bits, host, bytes);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto& slots = s.slots[{device, stream}];
  Slot* chosen = nullptr;
  for (auto& slot : slots) {
    if (slot->bytes == bytes && slot->bits == bits) chosen = slot.get();
  }
  if (chosen == nullptr) {
    for (auto& slot : slots) {
      if (slot->pins == 0 && (chosen == nullptr || slot->used < chosen->used)) chosen = slot.get();
    }
    if (chosen == nullptr || slots.size() < kSlotsPerStream) {
      slots.push_back(std::make_unique<Slot>());
      chosen = slots.back().get();
      chosen->device = allocate(s, cann, kSlotBytes);
    } else {
      // Work queued on the stream may still read the value being replaced; nothing else reads
      // this stream's slots, and pinned ones are never replaced.
      const aclError code = cann.base<acl::SynchronizeStream>("aclrtSynchronizeStream")(stream);
      if (code != 0) throw std::runtime_error("aclrtSynchronizeStream failed with " + std::to_string(code));
    }
    upload(cann, chosen->device, host, bytes);
    chosen->bytes = bytes, chosen->bits = bits;
  }
  ++chosen->pins;
  chosen->used = ++s.clock;
  return {chosen->device, chosen};
}

void unpin(Slot* slot) {
  std::lock_guard<std::mutex> lock(state().mu);
  --slot->pins;
}

Lease::Lease() {
  std::lock_guard<std::mutex> lock(state().mu);
  ++state().leases;
}

Lease::~Lease() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (--s.leases > 0 || s.cann == nullptr) return;
  // No kernel is left to launch work reading them; work queued before may still run.
  s.cann->base<acl::SynchronizeDevice>("aclrtSynchronizeDevice")();
  const auto free = s.cann->base<Free>("aclrtFree");
  for (const auto& [key, device] : s.constants) free(const_cast<void*>(device));
  for (const auto& [key, slots] : s.slots)
    for (const auto& slot : slots) free(slot->device);
  s.constants.clear();
  s.slots.clear();
}

}  // namespace oao::uploads
