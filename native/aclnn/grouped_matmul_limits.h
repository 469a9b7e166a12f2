// The limits of aclnnGroupedMatmulV4 (single tensors: splitItem 3, groupType 0 or 2) and of
// aclnnGroupedMatmulAddV2 beyond the contract (their pages in hicann/ops-transformer, gmm/): Atlas A2,
// A3 and Ascend 950 (V4 also lists Atlas inference products, but with its weight in FRACTAL_NZ only,
// which ONNX tensors never are), at most 1024 groups, every axis of x and weight under INT32_MAX
// once rounded up to 32 bytes, and on A2/A3 the last axis of x and of weight (as the vendor lays
// them out) under 65536.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "aclnn/limits.h"
#include "kernels/grouped_matmul_groups.h"

namespace oao {

inline constexpr int64_t kGmmMaxGroups = 1024;
inline constexpr int64_t kGmmMaxLastAxis = 65536;  // exclusive, A2/A3 only

// The vendor function that runs on `family` at all, whichever the shapes; `nz_on_inference`: it is
// there on Atlas inference products, for FRACTAL_NZ weights.
inline Ort::Status check_gmm_family(const char* op, const char* function, acl::Family family, bool nz_on_inference) {
  if (family == acl::Family::kInference && nz_on_inference) {
    return op_error(op, std::string("on ") + acl::family_name(family) + " " + function +
                            " takes its weight in FRACTAL_NZ only, and the op's tensors are ND");
  }
  if (family == acl::Family::kOther || family == acl::Family::kInference) {
    return op_error(op, std::string(function) + " is not supported on " + acl::family_name(family) +
                            " (the vendor lists Atlas A2, Atlas A3 and Ascend 950)");
  }
  return Ort::Status(nullptr);
}

inline Ort::Status check_gmm_groups(const char* op, const char* function, int64_t groups) {
  if (groups <= kGmmMaxGroups) return Ort::Status(nullptr);
  return op_error(op, "input 'group_list' holds " + std::to_string(groups) + " counts; " + function +
                          " takes at most " + std::to_string(kGmmMaxGroups) + " groups");
}

// An axis of `name` the vendor receives: under INT32_MAX once rounded up to 32 bytes.
template <class T>
Ort::Status check_gmm_axis(const char* op, const char* function, const char* name, int64_t size) {
  constexpr int64_t kPerBlock = 32 / static_cast<int64_t>(sizeof(T));
  if ((size + kPerBlock - 1) / kPerBlock * kPerBlock < INT32_MAX) return Ort::Status(nullptr);
  return op_error(op, std::string("input '") + name + "' has an axis of " + std::to_string(size) + " elements; " +
                          function + " needs every axis of x and weight under 2^31 - 1 once rounded up to 32 bytes");
}

// The last axis of a matrix the vendor reads (`name`'s `axis`, of `size`), under 65536 on A2/A3.
inline Ort::Status check_gmm_last_axis(const char* op, const char* function, acl::Family family, const char* name,
                                       const char* axis, int64_t size) {
  if (family == acl::Family::k950 || size < kGmmMaxLastAxis) return Ort::Status(nullptr);
  return op_error(op, std::string("input '") + name + "' has " + axis + " = " + std::to_string(size) + "; on " +
                          acl::family_name(family) + " " + function + " needs it under " +
                          std::to_string(kGmmMaxLastAxis) + " (the last axis of x and of weight as it reads them)");
}

// GroupedMatmul as aclnnGroupedMatmulV4 with the rows grouped: x [M, K] is read row-major (its last
// axis K) and weight [E, K, N] too (N), or as the transposed view of [E, N, K] (K).
template <class T>
Ort::Status check_grouped_matmul_limits(const char* op, acl::Family family, const GroupedMatmulShape& s) {
  constexpr const char* kV4 = "aclnnGroupedMatmulV4";
  return first_error([&] { return check_gmm_family(op, kV4, family, true); },
                     [&] { return check_gmm_groups(op, kV4, s.groups); },
                     [&] { return check_gmm_axis<T>(op, kV4, "x", s.m); },
                     [&] { return check_gmm_axis<T>(op, kV4, "x", s.k); },
                     [&] { return check_gmm_axis<T>(op, kV4, "weight", s.n); },
                     [&] { return check_gmm_axis<T>(op, kV4, "weight", s.groups); },
                     [&] { return check_gmm_last_axis(op, kV4, family, "x", "K", s.k); },
                     [&] {
                       return s.transpose_weight ? Ort::Status(nullptr)
                                                 : check_gmm_last_axis(op, kV4, family, "weight", "N", s.n);
                     });
}

// GroupedMatmulWeightGrad's vendor function: aclnnGroupedMatmulAddV2 takes float16 and bfloat16 only,
// so float32 goes through aclnnGroupedMatmulV4 with the token axis grouped.
template <class T>
constexpr const char* gmm_weight_grad_function() {
  return std::is_same_v<T, float> ? "aclnnGroupedMatmulV4" : "aclnnGroupedMatmulAddV2";
}

// Both functions multiply x [M, K] and dy [M, N] over the token axis M: x's block is the transposed
// left matrix (its last axis, as the vendor reads it, K), dy the right one (N); with
// transpose_weight the two swap, which leaves the same two limits.
template <class T>
Ort::Status check_grouped_matmul_weight_grad_limits(const char* op, acl::Family family, const GroupedMatmulShape& s) {
  constexpr const char* function = gmm_weight_grad_function<T>();
  return first_error([&] { return check_gmm_family(op, function, family, std::is_same_v<T, float>); },
                     [&] { return check_gmm_groups(op, function, s.groups); },
                     [&] { return check_gmm_axis<T>(op, function, "x", s.m); },
                     [&] { return check_gmm_axis<T>(op, function, "x", s.k); },
                     [&] { return check_gmm_axis<T>(op, function, "dy", s.n); },
                     [&] { return check_gmm_last_axis(op, function, family, "x", "K", s.k); },
                     [&] { return check_gmm_last_axis(op, function, family, "dy", "N", s.n); });
}

}  // namespace oao
