#include "kernels/rotary_position_embedding.h"

#include <algorithm>
#include <vector>

#include "kernels/rope_pairs.h"
#include "kernels/row.h"

namespace oao {
namespace {

// cos and sin of one cos row in pair order, float32.
struct CosSin {
  explicit CosSin(int64_t pairs) : data(4 * pairs), pairs(pairs) {}
  const float* cos_a() const { return data.data(); }
  const float* cos_b() const { return data.data() + pairs; }
  const float* sin_a() const { return data.data() + 2 * pairs; }
  const float* sin_b() const { return data.data() + 3 * pairs; }

  template <class T>
  void load(const PairPositions& pos, const T* cos, const T* sin) {
    for (int64_t p = 0; p < pairs; ++p) {
      data[p] = to_float(cos[pos.a(p)]);
      data[pairs + p] = to_float(cos[pos.b(p)]);
      data[2 * pairs + p] = to_float(sin[pos.a(p)]);
      data[3 * pairs + p] = to_float(sin[pos.b(p)]);
    }
  }

  std::vector<float> data;
  int64_t pairs;
};

// y[a] = x[xa] cos[a] - x[xb] sin[a], y[b] = x[xb] cos[b] + x[xa] sin[b].
template <class T>
void row_baseline(const PairPositions& pos, const T* x, T* y, const CosSin& cs) {
  for (int64_t p = 0; p < cs.pairs; ++p) {
    const float xa = to_float(x[pos.xa(p)]), xb = to_float(x[pos.xb(p)]);
    y[pos.a(p)] = from_float<T>(xa * cs.cos_a()[p] - xb * cs.sin_a()[p]);
    y[pos.b(p)] = from_float<T>(xb * cs.cos_b()[p] + xa * cs.sin_b()[p]);
  }
}

// 8 pairs at a time: y (like dy in the grad) is split except in mode 1; x is split in modes 0, 2.
template <bool kStream, bool kSplitY, bool kSplitX, class T>
__attribute__((target("avx2,fma,f16c"))) void row_avx2(const PairPositions& pos, const T* x, T* y,
                                                       const CosSin& cs) {
  const int64_t offset = pos.offset();
  for (int64_t p = 0; p < cs.pairs; p += 8) {
    const int64_t a = pos.a(p);
    __m256 xa, xb;
    if constexpr (kSplitX) {
      load_split(x, a, offset, xa, xb);
    } else {
      load_interleaved(x, p, xa, xb);
    }
    const __m256 ya = _mm256_sub_ps(_mm256_mul_ps(xa, _mm256_loadu_ps(cs.cos_a() + p)),
                                    _mm256_mul_ps(xb, _mm256_loadu_ps(cs.sin_a() + p)));
    const __m256 yb = _mm256_add_ps(_mm256_mul_ps(xb, _mm256_loadu_ps(cs.cos_b() + p)),
                                    _mm256_mul_ps(xa, _mm256_loadu_ps(cs.sin_b() + p)));
    if constexpr (kSplitY) {
      store_split<kStream>(y, a, offset, ya, yb);
    } else {
      store_interleaved<kStream>(y, p, ya, yb);
    }
  }
}

template <class T>
using RowFn = void (*)(const PairPositions&, const T*, T*, const CosSin&);

template <bool kStream, class T>
RowFn<T> pick_avx2_row_fn(const PairPositions& pos) {
  switch (pos.mode) {
    case RopeMode::kHalf:
    case RopeMode::kQuarter:
      return row_avx2<kStream, true, true, T>;
    case RopeMode::kInterleave:
      return row_avx2<kStream, false, false, T>;
    case RopeMode::kInterleaveHalf:
      break;
  }
  return row_avx2<kStream, true, false, T>;
}

template <class T>
RowFn<T> pick_row_fn(const PairPositions& pos, bool stream) {
  if (!use_avx2() || !pos.vectorizable()) return row_baseline<T>;
  return stream ? pick_avx2_row_fn<true, T>(pos) : pick_avx2_row_fn<false, T>(pos);
}

}  // namespace

template <class T>
void rotary_position_embedding(const T* x, const T* cos, const T* sin, T* y,
                               const std::vector<int64_t>& x_shape, const std::vector<int64_t>& cos_shape,
                               int mode, const Parallel& parallel) {
  const RopeRows rows(x_shape, cos_shape);
  const PairPositions pos{static_cast<RopeMode>(mode), x_shape.back()};
  if (pos.d == 0) return;
  const RopeSplit split(rows, false);
  const bool stream = use_streaming(y, rows.cos_rows() * rows.per_cos_row(), pos.d);
  const auto row_fn = pick_row_fn<T>(pos, stream);
  // As in the grad: cos rows a block at a time, each run of rows through the whole block.
  const int64_t block = cos_rows_per_block(2 * pos.d * static_cast<int64_t>(sizeof(float)));
  parallel.for_each(static_cast<size_t>(split.tasks()), [&](size_t task) {
    const int64_t group = static_cast<int64_t>(task) / split.chunks,
                  chunk = static_cast<int64_t>(task) % split.chunks;
    const auto runs = rows.runs(block_begin(chunk, split.chunks, rows.per_cos_row()),
                                block_begin(chunk + 1, split.chunks, rows.per_cos_row()));
    const int64_t c_begin = block_begin(group, split.groups, rows.cos_rows()),
                  c_end = block_begin(group + 1, split.groups, rows.cos_rows());
    std::vector<CosSin> tables(std::min(block, c_end - c_begin), CosSin(pos.d / 2));
    for (int64_t c0 = c_begin; c0 < c_end; c0 += block) {
      const int64_t n = std::min(block, c_end - c0);
      for (int64_t j = 0; j < n; ++j) tables[j].load(pos, cos + (c0 + j) * pos.d, sin + (c0 + j) * pos.d);
      for (const auto& [offset, count] : runs) {
        for (int64_t j = 0; j < n; ++j) {
          const int64_t r = (rows.dy_row(c0 + j, 0) + offset) * pos.d;
          for (int64_t i = 0; i < count; ++i) row_fn(pos, x + r + i * pos.d, y + r + i * pos.d, tables[j]);
        }
      }
    }
    if (stream) _mm_sfence();  // streaming stores are weakly ordered: finish them before the join
  });
}

template void rotary_position_embedding<float>(const float*, const float*, const float*, float*,
                                               const std::vector<int64_t>&, const std::vector<int64_t>&, int,
                                               const Parallel&);
template void rotary_position_embedding<half>(const half*, const half*, const half*, half*,
                                              const std::vector<int64_t>&, const std::vector<int64_t>&, int,
                                              const Parallel&);
template void rotary_position_embedding<bfloat16>(const bfloat16*, const bfloat16*, const bfloat16*,
                                                  bfloat16*, const std::vector<int64_t>&,
                                                  const std::vector<int64_t>&, int, const Parallel&);

}  // namespace oao
