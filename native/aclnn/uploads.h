// Host values that every node of a kind uploads alike (the vendor's causal mask; this step's step
// number, loss scale and found-inf seed), uploaded once and shared by the nodes, so that the bus
// carries them once per value, not once per node and step. Device memory from aclrtMalloc on the
// stream's device, kept for the process (a handful of bytes, and one mask per device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "aclnn/cann.h"

namespace oao::uploads {

// `host`, which never changes (static data), on the current device; null where the thread has
// no device (the CPU EP's test build), so that the caller uploads it for its call.
const void* constant(const acl::Cann& cann, const std::vector<uint8_t>& host);

// A slot holding a scalar of up to 8 bytes for the calls on one stream. The slot stays pinned
// (not overwritten) until `unpin`: the node that asked for it launches its kernel after asking.
struct Slot;
struct Scalar {
  const void* device = nullptr;  // null: no device (as `constant`)
  Slot* slot = nullptr;
};
Scalar scalar(const acl::Cann& cann, void* stream, const void* host, size_t bytes);
void unpin(Slot* slot);

}  // namespace oao::uploads
