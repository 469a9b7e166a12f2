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

// Host values the vendor copies when a first phase takes them (actual sequence lengths and the like).
struct aclIntArray {
  std::vector<int64_t> values;
};

// A host value an op takes by value (aclnnAdd's alpha): integers exact, floats as doubles.
struct aclScalar {
  aclDataType dtype;
  double value;
  int64_t integer;
};

// Owns its tensors: aclDestroyTensorList destroys them.
struct aclTensorList {
  std::vector<const aclTensor*> tensors;
};

struct aclOpExecutor {
  std::string launch_symbol;  // the only second phase that may run it
  uint64_t workspace_size;
  std::vector<const aclTensor*> tensors;  // inputs, then outputs; used until the launched work ran
  size_t inputs;
  std::function<void()> compute;
};

namespace aclemu {

enum class Kind { kTensor, kExecutor, kIntArray, kTensorList, kScalar, kCount };

// Bytes of (emulated) device or host memory a piece of stream work touches.
struct Range {
  const void* begin;
  size_t bytes;
};

// What a stream runs, in submission order, when the host waits for it (aclrtSynchronizeStream,
// aclrtSynchronizeEvent, aclrtSynchronizeDevice): never at submission, so that a host read of a
// device value before the wait, or a buffer freed before the work ran, is caught.
struct Work {
  std::string what;  // the submitting call, for errors: "aclnnRmsNormGrad", "aclrtMemcpyAsync"
  std::vector<Range> reads, writes;
  // May throw aclemu::Error (op.h): the stream then fails its next wait with that code and message.
  std::function<void()> run;
};

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
  // Queues `work` on `stream` (NULL: the default stream); ACL_ERROR_INVALID_PARAM, message set,
  // for a stream that is not live.
  aclError (*enqueue)(aclrtStream stream, Work work);
  // Empty when the host may read these bytes now, else why not: work still queued writes them.
  std::string (*host_read_hazard)(const void* begin, size_t bytes);
  // Counts a call of `symbol` under the library `return_address` lies in (aclemu_calls_from).
  void (*count_caller)(const char* symbol, const void* return_address);
  // Queued work keeps the aclTensors it uses: pin at launch; aclDestroyTensor then only defers
  // the delete (true) and the last unpin returns true when the tensor must be deleted now.
  void (*pin)(const aclTensor* tensor);
  bool (*defer_delete)(const aclTensor* tensor);
  bool (*unpin)(const aclTensor* tensor);
  // Adds to aclemu_collective_bytes(symbol): the bytes a collective libhccl.so queued hands in.
  void (*add_collective_bytes)(const char* symbol, uint64_t bytes);
};

}  // namespace aclemu

// The emulator's internal export for the shared state (acl_objects.h has the other, for aclop).
ACLEMU_API const aclemu::Hooks* aclemu_hooks(void);

namespace aclemu {
inline const Hooks& hooks() { return *aclemu_hooks(); }
}  // namespace aclemu
