// NonFiniteCheckAndUnscale on a contiguous buffer: GradScaler.unscale_'s product and inf/NaN
// test, one pass over the elements.
#pragma once

#include <cstdint>

#include "kernels/parallel.h"

namespace oao {

// out[i] = grads[i] * inv_scale in float32, rounded to T once; returns whether any grads[i] is an
// inf or a NaN. `out` may be `grads` (in place): element i is read before it is written, and by
// nobody else.
template <class T>
bool non_finite_check_and_unscale(const T* grads, float inv_scale, T* out, int64_t count, const Parallel& parallel);

}  // namespace oao
