// The CANN runtime, found and opened on first use with dlopen so that the library loads, and its
// CPU kernels run, on machines without CANN. Library names and order follow the vendor's install
// layouts (shared/seeds/ACLNN_ABI.md).
#pragma once

#include <string>
#include <vector>

#include "aclnn/acl_abi.h"

namespace oao::acl {

// The product families whose aclnn limits differ, from aclrtGetSocName().
enum class Family { kA2, kA3, k950, kInference, kOther, kUnknown };
const char* family_name(Family family);

class Cann {
 public:
  // The process's CANN runtime; throws std::runtime_error, saying what was looked for, when the
  // runtime libraries cannot be opened.
  static const Cann& get();

  // The function `name` from the operator libraries (split ones, else libopapi.so, then custom op
  // packages); throws std::runtime_error naming the symbol and the libraries searched.
  template <class F>
  F op(const char* name) const {
    return reinterpret_cast<F>(find_op(name));
  }
  // The function `name` from libnnopbase or the runtime library; throws like op().
  template <class F>
  F base(const char* name) const {
    return reinterpret_cast<F>(find_base(name));
  }

  // The function `name` from HCCL's libhccl.so (collectives); throws like op().
  template <class F>
  F collective(const char* name) const {
    return reinterpret_cast<F>(find_in(hccl_, name, "HCCL library"));
  }

  // The library the op symbol comes from (its path), for the signature-version check.
  std::string op_origin(const char* name) const;

  Family family() const;
  std::string soc_name() const;

 private:
  struct Library {
    std::string path;
    void* handle;
  };

  Cann();
  void* find_op(const char* name) const;
  void* find_base(const char* name) const;
  static void* find_in(const std::vector<Library>& libraries, const char* name, const char* what);

  std::vector<Library> base_;  // libnnopbase, then the runtime (libascendcl or libacl_rt)
  std::vector<Library> ops_;   // split libraries or libopapi.so, then custom packages
  std::vector<Library> hccl_;  // libhccl.so, where installed
};

}  // namespace oao::acl
