// Host values that every node of a kind uploads alike (the vendor's causal mask; this step's step
// number), uploaded once and shared by the nodes, so that the bus carries them once per value, not
// once per node and step. Device memory from aclrtMalloc on the stream's device, kept while any
// kernel of this library lives (a handful of bytes, and one mask per device).
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

// Held by every kernel that may upload. When the last one goes, every session using this library
// has ended (and ONNX Runtime may unload it, and this cache with it): the uploads are freed then,
// not left in device memory that nothing names any more (4 MiB a session of a causal model).
class Lease {
 public:
  Lease();
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
};

}  // namespace oao::uploads
