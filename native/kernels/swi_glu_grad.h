// SwiGluGrad on a contiguous x viewed as [outer, 2, half] and dy as [outer, half]
// (swi_glu_halves.h).
#pragma once

#include <cstdint>

#include "kernels/parallel.h"

namespace oao {

// With a = x[o, 0, j], b = x[o, 1, j], g = dy[o, j] and s = sigmoid(a), in float32 and rounded to T
// once: dx[o, 0, j] = g * b * s * (1 + a * (1 - s)) and dx[o, 1, j] = g * a * s. The same bits on
// the AVX2 and the plain path. T: float, half, bfloat16.
template <class T>
void swi_glu_grad(const T* dy, const T* x, T* dx, int64_t outer, int64_t half, const Parallel& parallel);

}  // namespace oao
