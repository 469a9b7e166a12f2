// The objects the ABI keeps opaque, and the hooks through which every emulator library reaches
// the one shared state, which lives in libascendcl.so.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "aclemu.h"
#include "aclnn/acl_abi.h"

#define ACLEMU_API extern "C" ACLEMU_EXPORT

struct aclTensor {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;  // in elements
  std::vector<int64_t> storage_dims;
  int64_t offset;  // in elements, from data
  aclDataType dtype;
  aclFormat format;
  void* data;  // start of the storage
};

struct aclOpExecutor {
  std::string launch_symbol;  // the only second phase that may run it
  uint64_t workspace_size;
  std::vector<const aclTensor*> tensors;  // referenced until launch, as the device's executor does
  std::function<void()> compute;
};

namespace aclemu {

enum class Kind { kTensor, kExecutor };

struct Hooks {
  // Counts a call of `symbol`; returns the injected failure code (message already set) or 0.
  aclnnStatus (*enter)(const char* symbol);
  void (*set_error)(const std::string& message);
  uint64_t (*workspace_override)();
  std::string (*soc)();
  void (*add_live)(Kind kind, const void* object);
  // False when the object is not live: the caller must not touch it.
  bool (*remove_live)(Kind kind, const void* object);
  bool (*is_live)(Kind kind, const void* object);
};

}  // namespace aclemu

// The emulator's one internal export.
ACLEMU_API const aclemu::Hooks* aclemu_hooks(void);

namespace aclemu {
inline const Hooks& hooks() { return *aclemu_hooks(); }
}  // namespace aclemu
