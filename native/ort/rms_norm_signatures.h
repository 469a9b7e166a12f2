// What RmsNorm and RmsNormGrad look like to ONNX Runtime on every execution provider: slot types,
// attributes and the contract's shape rules (1 <= rank(gamma) <= rank(x), gamma.shape ==
// x.shape[n:], n = rank(x) - rank(gamma)).
#pragma once

#include "ort/io.h"
#include "ort/schema.h"

namespace oao {

// The contract's (T, TG) table: gamma is T itself or float32.
template <class T, class TG>
constexpr bool allowed_pair() {
  return std::is_same_v<T, TG> || std::is_same_v<TG, float>;
}

// Kernels exist for all nine (T, TG) combinations (add_all_pairs) so that a pair outside the table
// gets this error, naming the types.
template <class T, class TG>
Ort::Status pair_error(const char* op) {
  return op_error(op,
                  std::string("inputs 'x' (") + type_name<T>() + ") and 'gamma' (" + type_name<TG>() +
                      ") are not an allowed (T, TG) pair; allowed: (float32, float32), (float16, float16), "
                      "(float16, float32), (bfloat16, bfloat16), (bfloat16, float32)");
}

struct NormGeometry {
  int64_t rows = 0;  // prod(x.shape[:n]), one rstd each
  int64_t cols = 0;  // prod(gamma.shape)
  size_t n = 0;
};

inline Ort::Status norm_geometry(const char* op, const Shape& x, const Shape& gamma, NormGeometry& g) {
  if (x.empty()) return op_error(op, "input 'x' has rank 0; it must have rank >= 1");
  if (gamma.empty() || gamma.size() > x.size()) {
    return op_error(op, "input 'gamma' has rank " + std::to_string(gamma.size()) +
                            "; the rule is 1 <= rank(gamma) <= rank(x) = " + std::to_string(x.size()));
  }
  g.n = x.size() - gamma.size();
  if (!std::equal(gamma.begin(), gamma.end(), x.begin() + g.n)) {
    return op_error(op, "input 'gamma' has shape " + shape_str(gamma) + " but x " + shape_str(x) +
                            " needs gamma.shape == x.shape[n:] with n = rank(x) - rank(gamma)");
  }
  g.rows = element_count(x, 0, g.n);
  g.cols = element_count(x, g.n, x.size());
  return Ort::Status(nullptr);
}

// rstd in keepdims form: x.shape[:n] + [1] * rank(gamma).
inline Shape rstd_shape(const Shape& x, size_t n) {
  Shape s(x.begin(), x.begin() + n);
  s.resize(x.size(), 1);
  return s;
}

inline Shape without_ones(const Shape& s) {
  Shape out;
  for (int64_t d : s)
    if (d != 1) out.push_back(d);
  return out;
}

// Both ops' (T, TG) rule.
template <class T, class TG>
struct RmsNormTypes : Signature {
  static constexpr TypeOf kTypes[] = {{"T", element_type<T>()}, {"TG", element_type<TG>()}};
  static constexpr bool kTypesAllowed = allowed_pair<T, TG>();
};

template <class T, class TG>
struct RmsNormSignature : RmsNormTypes<T, TG> {
  using Schema = schema::RmsNorm;
  static constexpr const char* kName = Schema::kName;
  static Ort::Status type_error() { return pair_error<T, TG>(kName); }

  explicit RmsNormSignature(const OrtKernelInfo* info)
      : epsilon(attribute<float>(info, "epsilon").value_or(Schema::kEpsilon)) {}

  struct Args {
    Input<T> x;
    Input<TG> gamma;
    NormGeometry g;
  };
  // The inputs, checked against the contract.
  static Ort::Status read(const Io& io, Args& a) {
    a.x = io.input<T>(Schema::kInput_x);
    a.gamma = io.input<TG>(Schema::kInput_gamma);
    return norm_geometry(kName, a.x.shape, a.gamma.shape, a.g);
  }

  float epsilon;
};

template <class T, class TG>
struct RmsNormGradSignature : RmsNormTypes<T, TG> {
  using Schema = schema::RmsNormGrad;
  static constexpr const char* kName = Schema::kName;
  static Ort::Status type_error() { return pair_error<T, TG>(kName); }

  explicit RmsNormGradSignature(const OrtKernelInfo*) {}

  struct Args {
    Input<T> dy, x;
    Input<float> rstd;
    Input<TG> gamma;
    NormGeometry g;
  };
  // The inputs, checked against the contract.
  static Ort::Status read(const Io& io, Args& a) {
    a.dy = io.input<T>(Schema::kInput_dy);
    a.x = io.input<T>(Schema::kInput_x);
    a.rstd = io.input<float>(Schema::kInput_rstd);
    a.gamma = io.input<TG>(Schema::kInput_gamma);
    if (auto status = norm_geometry(kName, a.x.shape, a.gamma.shape, a.g); !status.IsOK()) return status;
    if (a.dy.shape != a.x.shape) {
      return op_error(kName, "input 'dy' has shape " + shape_str(a.dy.shape) + " but must equal x's shape " +
                                 shape_str(a.x.shape));
    }
    // Equal to x's leading axes up to size-1 axes ([B,S,1], [B,S], [B,1,S], ...). A flattened
    // [B*S] is refused: the contract asks for the rows' own axes.
    const Shape lead(a.x.shape.begin(), a.x.shape.begin() + a.g.n);
    if (without_ones(a.rstd.shape) != without_ones(lead)) {
      return op_error(kName, "input 'rstd' has shape " + shape_str(a.rstd.shape) +
                                 "; it must hold one value per row, shaped " +
                                 shape_str(rstd_shape(a.x.shape, a.g.n)) + " or " + shape_str(lead) +
                                 " (size-1 axes may be added or dropped)");
    }
    return Ort::Status(nullptr);
  }
};

}  // namespace oao
