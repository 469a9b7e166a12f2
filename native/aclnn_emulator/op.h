// The two-phase driver every emulated op shares, and the argument checks its first phase uses.
// A failed check throws Error; prepare() and launch() turn it into the status code and the
// recent error message "<symbol>: <rule>".
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "emulator.h"

namespace aclemu {

using namespace oao::acl;  // the status codes

struct Error {
  aclnnStatus code;
  std::string message;
};

[[noreturn]] inline void fail(aclnnStatus code, std::string message) {
  throw Error{code, std::move(message)};
}

// A required tensor: non-null (161001), a live aclTensor in an ND-family format whose view lies
// inside its storage (161002), with data unless it is empty (161001).
const aclTensor& need(const aclTensor* t, const char* name);
void check_dtype(const aclTensor& t, const char* name, std::initializer_list<aclDataType> allowed);
void check_same_dtype(const aclTensor& t, const char* name, const aclTensor& ref, const char* ref_name);
void check_contiguous(const aclTensor& t, const char* name);
// 361001 when queued work still writes the tensor: a first phase that reads a device value must
// come after the work producing it ran.
void check_host_read(const aclTensor& t, const char* name);  // 161002: the op takes no strided view here
void check_rank(const aclTensor& t, const char* name, size_t lo, size_t hi);  // 561002
void check_shape(const aclTensor& t, const char* name, const std::vector<int64_t>& want,
                 const std::string& rule);  // 561002, naming the rule

// Product families by SoC name, as aclrtGetSocName reports it.
enum class Product { kA2, kA3, k950, k310P, kOther };
Product product();
std::string soc_name();
[[noreturn]] void fail_product();  // 561002 "not supported on this product"

// What a first phase hands to its executor.
struct Plan {
  std::vector<const aclTensor*> inputs;
  std::vector<const aclTensor*> outputs;
  std::function<void()> compute;  // runs at launch, reading and writing the tensors' memory
};

// Phase 1: counts the call, runs `check` (which validates and returns the plan) and creates the
// executor that only `launch_symbol` may run.
aclnnStatus prepare(const char* symbol, const char* launch_symbol, uint64_t* workspace_size,
                    aclOpExecutor** executor, const std::function<Plan()>& check);
// Phase 2: validates the workspace and queues the plan on `stream`; the executor is freed once that
// work has run, or on return when the launch fails.
aclnnStatus launch(const char* symbol, void* workspace, uint64_t workspace_size, aclOpExecutor* executor,
                   aclrtStream stream);

}  // namespace aclemu
