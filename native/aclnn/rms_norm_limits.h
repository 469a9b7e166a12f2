// aclnnRmsNorm's and aclnnRmsNormGrad's limits beyond the contract (their pages): rank 1-8, and on
// Atlas inference products no bfloat16, gamma of x's type, and at least 32 bytes per row.
#pragma once

#include "aclnn/limits.h"

namespace oao {

template <class T, class TG>
Ort::Status check_rms_norm_product(const char* op, acl::Family family, const Shape& x, int64_t row_elements) {
  if (auto status = check_rank(op, "x", x, 1, 8); !status.IsOK()) return status;
  if (family == acl::Family::kOther) return not_supported_on(op, family);
  if (family != acl::Family::kInference) return Ort::Status(nullptr);
  if (!std::is_same_v<T, TG> || std::is_same_v<T, Ort::BFloat16_t>) {
    return op_error(op, std::string("on ") + acl::family_name(family) + " aclnn" + op +
                            " takes (float16, float16) or (float32, float32) for (x, gamma), not (" +
                            type_name<T>() + ", " + type_name<TG>() + ")");
  }
  if (row_elements * static_cast<int64_t>(sizeof(T)) < 32) {
    return op_error(op, std::string("on ") + acl::family_name(family) + " aclnn" + op +
                            " needs at least 32 bytes per normalized row; x has " +
                            std::to_string(row_elements) + " elements of " + type_name<T>());
  }
  return Ort::Status(nullptr);
}

}  // namespace oao
