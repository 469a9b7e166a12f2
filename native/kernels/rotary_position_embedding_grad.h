// RotaryPositionEmbeddingGrad on contiguous buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/parallel.h"

namespace oao {

// dx from dy, cos and sin; with x (non-null), also dcos and dsin: the sums over the axes cos
// broadcasts along of dy * x and dy * rotate(x) (float32 accumulation, fixed order). cos_shape
// has dy_shape's rank and broadcasts to it; the last axis D is never broadcast and suits `mode`
// (0 half, 1 interleave, 2 quarter, 3 interleave-half). T: float, half or bfloat16.
template <class T>
void rotary_position_embedding_grad(const T* dy, const T* cos, const T* sin, const T* x, T* dx, T* dcos,
                                    T* dsin, const std::vector<int64_t>& dy_shape,
                                    const std::vector<int64_t>& cos_shape, int mode,
                                    const Parallel& parallel);

}  // namespace oao
