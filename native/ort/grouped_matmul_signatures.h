// What GroupedMatmul and GroupedMatmulWeightGrad look like to ONNX Runtime on every execution
// provider: slot types, transpose_weight, and the contract's rules
// (x [M, K], weight [E, K, N] or [E, N, K], dy [M, N], group_list [E] of counts >= 0 adding up to M).
#pragma once

#include <algorithm>

#include "kernels/grouped_matmul_groups.h"
#include "ort/io.h"
#include "ort/schema.h"

namespace oao {

// The counts as the error shows them: all of them, or the first 16 and how many more.
inline std::string counts_str(const int64_t* counts, int64_t n) {
  constexpr int64_t kShown = 16;
  std::string s = "[";
  for (int64_t i = 0; i < std::min(n, kShown); ++i) s += (i ? ", " : "") + std::to_string(counts[i]);
  if (n > kShown) s += ", ... (" + std::to_string(n - kShown) + " more)";
  return s + "]";
}

// group_list's shape: rank 1, its length the number of groups.
inline Ort::Status read_group_list(const char* op, const Shape& list, GroupedMatmulShape& s) {
  if (list.size() != 1) {
    return op_error(op, "input 'group_list' has shape " + shape_str(list) + "; it must have rank 1 ([E])");
  }
  s.groups = list[0];
  return Ort::Status(nullptr);
}

// The counts, in host memory: none negative, adding up to s.m; then s.counts points at them.
inline Ort::Status check_counts(const char* op, const int64_t* counts, GroupedMatmulShape& s) {
  int64_t left = s.m;  // rows not yet given to a group; never overflows
  for (int64_t g = 0; g < s.groups; ++g) {
    const int64_t c = counts[g];
    if (c < 0 || c > left) {
      return op_error(op, "input 'group_list' holds the counts " + counts_str(counts, s.groups) + ": " +
                              (c < 0 ? "count " + std::to_string(g) + " is negative"
                                     : "they add up to more than x.shape[0] = " + std::to_string(s.m)) +
                              "; they must be >= 0 and add up to x.shape[0]");
    }
    left -= c;
  }
  if (left != 0) {
    return op_error(op, "input 'group_list' holds the counts " + counts_str(counts, s.groups) + ", which add up to " +
                            std::to_string(s.m - left) + "; they must add up to x.shape[0] = " + std::to_string(s.m));
  }
  s.counts = counts;
  return Ort::Status(nullptr);
}

inline Ort::Status require_rank(const char* op, const char* name, const Shape& shape, size_t rank) {
  if (shape.size() == rank) return Ort::Status(nullptr);
  return op_error(op, std::string("input '") + name + "' has shape " + shape_str(shape) + "; it must have rank " +
                          std::to_string(rank));
}

// What both ops' signatures share: the type, transpose_weight and group_list (on the host where
// kHostInputs holds it). Each op's read() checks every rule, the counts last; a kernel with
// group_list in device memory reads the rest (read_shapes) and checks the counts itself.
template <class T, class OpSchema>
struct GroupedMatmulCommon : Signature {
  using Schema = OpSchema;
  static constexpr const char* kName = Schema::kName;
  static constexpr TypeOf kTypes[] = {{"T", element_type<T>()}};
  static constexpr schema::InputIndex kHostInputs[] = {Schema::kInput_group_list};

  explicit GroupedMatmulCommon(const OrtKernelInfo* info)
      : transpose_weight(attribute<int64_t>(info, "transpose_weight").value_or(Schema::kTransposeWeight)) {}

  // transpose_weight, checked against its choices.
  Ort::Status read_transpose_weight(GroupedMatmulShape& s) const {
    if (auto error = choice_error("transpose_weight", transpose_weight, Schema::kTransposeWeightChoices);
        !error.empty())
      return op_error(kName, error);
    s.transpose_weight = transpose_weight == 1;
    return Ort::Status(nullptr);
  }
  // group_list's shape (s.groups) and where its counts are.
  Ort::Status read_groups(const Io& io, GroupedMatmulShape& s, const void*& group_list) const {
    const Io::Untyped list = io.untyped_input(Schema::kInput_group_list);
    group_list = list.data;
    return read_group_list(kName, list.shape, s);
  }

  int64_t transpose_weight;
};

template <class T>
struct GroupedMatmulSignature : GroupedMatmulCommon<T, schema::GroupedMatmul> {
  using Base = GroupedMatmulCommon<T, schema::GroupedMatmul>;
  using Base::Base, Base::kName;
  using Schema = typename Base::Schema;

  struct Args {
    Input<T> x, weight;
    const void* group_list;  // in host memory where kHostInputs holds it, else the device's
    GroupedMatmulShape s;
    Shape y;
  };
  // The inputs, checked against the contract.
  Ort::Status read(const Io& io, Args& a) const {
    if (auto status = read_shapes(io, a); !status.IsOK()) return status;
    return check_counts(kName, static_cast<const int64_t*>(a.group_list), a.s);
  }
  // All but the counts.
  Ort::Status read_shapes(const Io& io, Args& a) const {
    GroupedMatmulShape& s = a.s;
    if (auto status = this->read_transpose_weight(s); !status.IsOK()) return status;
    a.x = io.input<T>(Schema::kInput_x);
    a.weight = io.input<T>(Schema::kInput_weight);
    if (auto status = require_rank(kName, "x", a.x.shape, 2); !status.IsOK()) return status;
    if (auto status = require_rank(kName, "weight", a.weight.shape, 3); !status.IsOK()) return status;
    s.m = a.x.shape[0];
    s.k = a.x.shape[1];
    const int64_t weight_k = a.weight.shape[s.transpose_weight ? 2 : 1];
    s.n = a.weight.shape[s.transpose_weight ? 1 : 2];
    if (weight_k != s.k) {
      return op_error(kName, "input 'weight' has shape " + shape_str(a.weight.shape) + " and 'x' " +
                                 shape_str(a.x.shape) + ": weight.shape[" + (s.transpose_weight ? "2" : "1") +
                                 "] must equal x.shape[1] (transpose_weight = " +
                                 std::to_string(this->transpose_weight) + ")");
    }
    if (auto status = this->read_groups(io, s, a.group_list); !status.IsOK()) return status;
    if (s.groups != a.weight.shape[0]) {
      return op_error(kName, "input 'group_list' has " + std::to_string(s.groups) + " counts and 'weight' " +
                                 std::to_string(a.weight.shape[0]) + " experts; they must be equal");
    }
    a.y = {s.m, s.n};
    return Ort::Status(nullptr);
  }
};

template <class T>
struct GroupedMatmulWeightGradSignature : GroupedMatmulCommon<T, schema::GroupedMatmulWeightGrad> {
  using Base = GroupedMatmulCommon<T, schema::GroupedMatmulWeightGrad>;
  using Base::Base, Base::kName;
  using Schema = typename Base::Schema;

  struct Args {
    Input<T> x, dy;
    const void* group_list;  // in host memory where kHostInputs holds it, else the device's
    GroupedMatmulShape s;
    Shape dweight;
  };
  // The inputs, checked against the contract.
  Ort::Status read(const Io& io, Args& a) const {
    if (auto status = read_shapes(io, a); !status.IsOK()) return status;
    return check_counts(kName, static_cast<const int64_t*>(a.group_list), a.s);
  }
  // All but the counts.
  Ort::Status read_shapes(const Io& io, Args& a) const {
    GroupedMatmulShape& s = a.s;
    if (auto status = this->read_transpose_weight(s); !status.IsOK()) return status;
    a.x = io.input<T>(Schema::kInput_x);
    a.dy = io.input<T>(Schema::kInput_dy);
    if (auto status = require_rank(kName, "x", a.x.shape, 2); !status.IsOK()) return status;
    if (auto status = require_rank(kName, "dy", a.dy.shape, 2); !status.IsOK()) return status;
    if (a.dy.shape[0] != a.x.shape[0]) {
      return op_error(kName, "input 'dy' has shape " + shape_str(a.dy.shape) + " and 'x' " + shape_str(a.x.shape) +
                                 "; they must have the same number of rows");
    }
    s.m = a.x.shape[0];
    s.k = a.x.shape[1];
    s.n = a.dy.shape[1];
    if (auto status = this->read_groups(io, s, a.group_list); !status.IsOK()) return status;
    a.dweight = s.transpose_weight ? Shape{s.groups, s.n, s.k} : Shape{s.groups, s.k, s.n};
    return Ort::Status(nullptr);
  }
};

}  // namespace oao
