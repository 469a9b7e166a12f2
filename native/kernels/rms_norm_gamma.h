// What RmsNorm and its grad share: gamma as their row loops take it.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/element.h"
#include "kernels/row.h"
#include "kernels/vec.h"

namespace oao {
namespace {

// gamma in float32, in the lane order of T for the AVX2 loops (lane_order, see load16), and whether
// all of it is finite (which lets bfloat16 rows leave their NaN checks out: see round_to_bf16_high).
template <class T>
struct RmsNormGamma {
  std::vector<float> f;
  bool finite;

  template <class TG>
  RmsNormGamma(const TG* gamma, int64_t cols, bool lane_order) : f(cols) {
    for (int64_t j = 0; j < cols; ++j) f[j] = to_float(gamma[j]);
    finite = all_finite(f.data(), cols);
    if (lane_order) to_lane_order<T>(f.data(), cols);
  }
};

}  // namespace
}  // namespace oao
