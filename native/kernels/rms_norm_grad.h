// RmsNormGrad on contiguous buffers: rows of `cols` normalized elements.
#pragma once

#include <cstdint>

#include "kernels/parallel.h"

namespace oao {

// dx = rstd * (dy*gamma - xhat * mean(dy*gamma*xhat)), xhat = x * rstd, per row;
// dgamma = sum over rows of dy * xhat (float32, fixed summation order).
// rstd holds one value per row. Supported (T, TG): (float, float), (half, half), (half, float),
// (bfloat16, bfloat16), (bfloat16, float).
template <class T, class TG>
void rms_norm_grad(const T* dy, const T* x, const float* rstd, const TG* gamma, T* dx, float* dgamma,
                   int64_t rows, int64_t cols, const Parallel& parallel);

}  // namespace oao
