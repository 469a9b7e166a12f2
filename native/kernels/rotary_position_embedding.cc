#include "kernels/rotary_position_embedding.h"

#include <vector>

#include "kernels/rotary_position_embedding_pairs.h"
#include "kernels/row.h"

namespace oao {
namespace {

// `count` rows of x that read one cos row and follow each other in memory, into y:
// y[a] = x[xa] cos[a] - x[xb] sin[a], y[b] = x[xb] cos[b] + x[xa] sin[b].
template <class T>
void rows_baseline(const PairPositions& pos, const T* x, T* y, int64_t count, const PairRow& pr) {
  for (int64_t i = 0; i < count; ++i, x += pos.d, y += pos.d) {
    for (int64_t p = 0; p < pr.pairs; ++p) {
      const float xa = to_float(x[pos.xa(p)]), xb = to_float(x[pos.xb(p)]);
      y[pos.a(p)] = from_float<T>(xa * pr.cos_a()[p] - xb * pr.sin_a()[p]);
      y[pos.b(p)] = from_float<T>(xb * pr.cos_b()[p] + xa * pr.sin_b()[p]);
    }
  }
}

// The same with AVX2, run by run as in the grad: y takes layout kY (and cos and sin with it),
// x takes kX.
template <Layout kY, Layout kX, bool kStream, class T>
OAO_AVX2_TARGET void rows_avx2(const PairPositions& pos, const T* x, T* y, int64_t count, const PairRow& pr) {
  constexpr int kV = kVectors<kY>;
  const int64_t offset = pos.offset(), vec = vector_pairs<kY>(offset);
  const bool descending = kMayDescend<kX, kY, T> && store_runs_ahead(y, x);
  const int64_t first = descending ? vec - 8 * kV : 0, step = descending ? -8 * kV : 8 * kV;
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t run = 0; run < pr.pairs; run += offset) {
      const T* x_run = x + i * pos.d + pos.xa(run);
      T* y_run = y + i * pos.d + pos.a(run);
      for (int64_t q = vec; q < offset; ++q) {
        const float xa = to_float(x_run[run_a<kX>(q)]), xb = to_float(x_run[run_b<kX>(q, offset)]);
        const int64_t p = run + q;
        y_run[run_a<kY>(q)] = from_float<T>(xa * pr.cos_a()[p] - xb * pr.sin_a()[p]);
        y_run[run_b<kY>(q, offset)] = from_float<T>(xb * pr.cos_b()[p] + xa * pr.sin_b()[p]);
      }
      for (int64_t j = first; j >= 0 && j < vec; j += step) {
        __m256 xa[kV], xb[kV], ya[kV], yb[kV];
        load_run<kX>(x_run, offset, j, xa, xb);
        for (int v = 0; v < kV; ++v) {
          const int64_t q = run + j + 8 * v;
          ya[v] = _mm256_sub_ps(_mm256_mul_ps(xa[v], _mm256_loadu_ps(pr.cos_a() + q)),
                                _mm256_mul_ps(xb[v], _mm256_loadu_ps(pr.sin_a() + q)));
          yb[v] = _mm256_add_ps(_mm256_mul_ps(xb[v], _mm256_loadu_ps(pr.cos_b() + q)),
                                _mm256_mul_ps(xa[v], _mm256_loadu_ps(pr.sin_b() + q)));
        }
        store_run<kY, kStream>(y_run, offset, j, ya, yb);
      }
    }
  }
}

// The row loop and the table load of one path, in the same pair order.
template <class T>
struct Loops {
  void (*rows)(const PairPositions&, const T*, T*, int64_t, const PairRow&);
  void (*load_pairs)(const PairPositions&, const T*, float*, float*);
};

template <bool kStream, class T>
Loops<T> pick_avx2_loops(const PairPositions& pos) {
  return visit_layouts<T>(pos, [](auto y, auto x) {
    return Loops<T>{rows_avx2<decltype(y)::value, decltype(x)::value, kStream, T>,
                    load_pairs_avx2<decltype(y)::value, T>};
  });
}

template <class T>
Loops<T> pick_loops(const PairPositions& pos, bool stream) {
  if (!use_avx2()) return {rows_baseline<T>, load_pairs_baseline<T>};
  return stream ? pick_avx2_loops<true, T>(pos) : pick_avx2_loops<false, T>(pos);
}

}  // namespace

template <class T>
void rotary_position_embedding(const T* x, const T* cos, const T* sin, T* y,
                               const std::vector<int64_t>& x_shape, const std::vector<int64_t>& cos_shape,
                               int mode, const Parallel& parallel) {
  const RotaryPositionEmbeddingRows rows(x_shape, cos_shape);
  const PairPositions pos{static_cast<RotaryPositionEmbeddingMode>(mode), x_shape.back()};
  if (pos.d == 0) return;
  const RotaryPositionEmbeddingSplit split(rows, false);
  const bool stream = pos.whole_vectors() && use_streaming(y, rows.cos_rows() * rows.per_cos_row(), pos.d);
  const auto loops = pick_loops<T>(pos, stream);
  const auto load = [&](int64_t c, const PairRow& pr) {
    loops.load_pairs(pos, cos + c * pos.d, pr.cos_a(), pr.cos_b());
    loops.load_pairs(pos, sin + c * pos.d, pr.sin_a(), pr.sin_b());
  };
  const auto run_rows = [&](int64_t r, int64_t count, const PairRow& pr) {
    loops.rows(pos, x + r, y + r, count, pr);
  };
  for_each_cos_block(rows, split, pos.d, 2 * pos.d /* cos and sin */, stream, parallel, load, run_rows,
                     [](int64_t, int64_t, const PairRow&) {});
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
