// RmsNorm forward on contiguous buffers: rows of `cols` normalized elements.
#pragma once

#include <cstdint>

#include "kernels/parallel.h"

namespace oao {

// rstd[r] = 1 / sqrt(mean(x[r]^2) + epsilon); y = x * rstd * gamma. Same (T, TG) pairs as
// rms_norm_grad.
template <class T, class TG>
void rms_norm(const T* x, const TG* gamma, float epsilon, T* y, float* rstd, int64_t rows, int64_t cols,
              const Parallel& parallel);

}  // namespace oao
