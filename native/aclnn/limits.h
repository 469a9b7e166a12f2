// Helpers for the vendor's documented limits, checked before aclnn is called so that a user reads
// the rule rather than a vendor error code.
#pragma once

#include <initializer_list>
#include <string>

#include "aclnn/cann.h"
#include "ort/glue.h"

namespace oao {

inline Ort::Status not_supported_on(const char* op, acl::Family family) {
  return op_error(op, std::string("aclnn") + op + " is not supported on " + acl::family_name(family) +
                          " (the vendor lists Atlas A2, Atlas A3 and Ascend 950)");
}

inline bool one_of(acl::Family family, std::initializer_list<acl::Family> families) {
  for (acl::Family f : families)
    if (f == family) return true;
  return false;
}

// Documented rank ranges ("Dimension 1-8" and the like).
inline Ort::Status check_rank(const char* op, const char* name, const Shape& shape, size_t low, size_t high) {
  if (shape.size() >= low && shape.size() <= high) return Ort::Status(nullptr);
  return op_error(op, std::string("input '") + name + "' has rank " + std::to_string(shape.size()) +
                          "; aclnn" + op + " takes rank " + std::to_string(low) +
                          (low == high ? "" : " to " + std::to_string(high)));
}

// The first failing check's status; each check runs only when those before it passed.
template <class... Checks>
Ort::Status first_error(Checks&&... checks) {
  Ort::Status status(nullptr);
  (void)((status = checks(), status.IsOK()) && ...);
  return status;
}

}  // namespace oao
