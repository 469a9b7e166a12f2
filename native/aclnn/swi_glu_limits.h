// aclnnSwiGlu's and aclnnSwiGluGrad's limits beyond the contract (their pages): rank 1-8, and on
// Atlas inference products float16 or float32 only, with x's last axis a multiple of 64 bytes.
#pragma once

#include "aclnn/limits.h"

namespace oao {

template <class T>
Ort::Status check_swi_glu_product(const char* op, acl::Family family, const Shape& x) {
  if (auto status = check_rank(op, "x", x, 1, 8); !status.IsOK()) return status;
  if (family == acl::Family::kOther) return not_supported_on(op, family);
  if (family != acl::Family::kInference) return Ort::Status(nullptr);
  if (std::is_same_v<T, Ort::BFloat16_t>) {
    return op_error(op, std::string("on ") + acl::family_name(family) + " aclnn" + op +
                            " takes float16 or float32, not bfloat16");
  }
  if (x.back() * static_cast<int64_t>(sizeof(T)) % 64 != 0) {
    return op_error(op, std::string("on ") + acl::family_name(family) + " aclnn" + op +
                            " needs x's last axis to hold a multiple of 64 bytes; it holds " +
                            std::to_string(x.back()) + " elements of " + type_name<T>());
  }
  return Ort::Status(nullptr);
}

}  // namespace oao
