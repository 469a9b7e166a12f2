// The layout SwiGlu and SwiGluGrad share: x viewed as [outer, 2, half], the gate half A and the
// value half B of each outer index contiguous, y (and dy) as [outer, half].
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/parallel.h"

namespace oao {

// Calls segment(o, begin, end) for the elements [begin, end) of outer index o's halves, every
// element once, split in blocks over the outer * half output elements. Elements are independent,
// so any split gives the same bits; a split of the flat index also spreads a single outer index
// (dim = 0) over the threads.
template <class F>
void for_glu_segments(int64_t outer, int64_t half, const Parallel& parallel, F&& segment) {
  const int64_t total = outer * half;
  const size_t blocks = block_count(static_cast<size_t>(total), 1);
  parallel.for_each(blocks, [&](size_t b) {
    const int64_t end = block_begin(b + 1, blocks, total);
    for (int64_t i = block_begin(b, blocks, total); i < end;) {
      const int64_t o = i / half, j = i - o * half, stop = std::min(half, j + (end - i));
      segment(o, j, stop);
      i += stop - j;
    }
  });
}

}  // namespace oao
