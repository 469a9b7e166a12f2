// aclnnApplyAdamWV2's limits beyond the contract (its page): Atlas A2 and A3 training products and
// Ascend 950 only, rank 1-8, and grad of varRef's type (float32 masters get float32 gradients).
#pragma once

#include "aclnn/limits.h"

namespace oao {

template <class TP, class T>
Ort::Status check_apply_adam_w_product(const char* op, acl::Family family, const Shape& param) {
  if (!one_of(family, {acl::Family::kA2, acl::Family::kA3, acl::Family::k950})) {
    return op_error(op, std::string("aclnnApplyAdamWV2 is not supported on ") + acl::family_name(family) +
                            " (the vendor lists Atlas A2, Atlas A3 and Ascend 950)");
  }
  if (!std::is_same_v<TP, T>) {
    return op_error(op, std::string("aclnnApplyAdamWV2 takes 'grad' of param's type; got grad ") + type_name<T>() +
                            " for param " + type_name<TP>() + " (cast the gradient to " + type_name<TP>() +
                            " first)");
  }
  return check_rank(op, "param", param, 1, 8);
}

}  // namespace oao
