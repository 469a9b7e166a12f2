// SwiGlu on a contiguous x viewed as [outer, 2, half] (swi_glu_halves.h).
#pragma once

#include <cstdint>

#include "kernels/parallel.h"

namespace oao {

// y[o, j] = a * sigmoid(a) * b with a = x[o, 0, j], b = x[o, 1, j], in float32, rounded to T once.
// The same bits on the AVX2 and the plain path. T: float, half, bfloat16.
template <class T>
void swi_glu(const T* x, T* y, int64_t outer, int64_t half, const Parallel& parallel);

}  // namespace oao
