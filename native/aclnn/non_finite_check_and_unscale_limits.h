// aclnnForeachNonFiniteCheckAndUnscale's limits beyond the contract (its page in hicann/ops-nn):
// Atlas A2 and A3 training products and Ascend 950 only, and tensors of rank 0-8.
#pragma once

#include "aclnn/limits.h"

namespace oao {

inline Ort::Status check_non_finite_check_and_unscale_product(const char* op, acl::Family family,
                                                              const Shape& grads) {
  if (!one_of(family, {acl::Family::kA2, acl::Family::kA3, acl::Family::k950})) {
    return op_error(op, std::string("aclnnForeachNonFiniteCheckAndUnscale is not supported on ") +
                            acl::family_name(family) + " (the vendor lists Atlas A2, Atlas A3 and Ascend 950)");
  }
  if (grads.size() > 8) {
    return op_error(op, "input 'scaled_grads' has rank " + std::to_string(grads.size()) +
                            "; aclnnForeachNonFiniteCheckAndUnscale takes rank 0 to 8 (flatten it)");
  }
  return Ort::Status(nullptr);
}

}  // namespace oao
