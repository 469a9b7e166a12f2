// RotaryPositionEmbedding (forward) on contiguous buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/parallel.h"

namespace oao {

// y = x * cos + rotate(x) * sin, rotate being `mode`'s signed permutation of the last axis (mode 3
// de-interleaves x first). cos_shape has x_shape's rank and broadcasts to it, the last axis D
// excepted. T: float, half or bfloat16.
template <class T>
void rotary_position_embedding(const T* x, const T* cos, const T* sin, T* y,
                               const std::vector<int64_t>& x_shape, const std::vector<int64_t>& cos_shape,
                               int mode, const Parallel& parallel);

}  // namespace oao
