#include "kernels/rotary_position_embedding_grad.h"

#include <algorithm>
#include <type_traits>

#include "kernels/rotary_position_embedding_pairs.h"
#include "kernels/row.h"

namespace oao {
namespace {

// `count` dy rows that read one cos row and follow each other in memory, with their x and dx rows
// (x is null without x).
template <class T>
struct Rows {
  const T* dy;
  const T* x;
  T* dx;
  int64_t count;
};

// dx[a] = dy[a] cos[a] + dy[b] sin[b] and dx[b] = dy[b] cos[b] - dy[a] sin[a] (a and b at x's
// positions for dx); with x, the rows' terms of dcos and dsin, row by row.
template <bool kHasX, class T>
void grad_rows_baseline(const PairPositions& pos, const Rows<T>& rows, const PairRow& pr) {
  for (int64_t i = 0; i < rows.count; ++i) {
    const T* dy = rows.dy + i * pos.d;
    T* dx = rows.dx + i * pos.d;
    for (int64_t p = 0; p < pr.pairs; ++p) {
      const float dya = to_float(dy[pos.a(p)]), dyb = to_float(dy[pos.b(p)]);
      dx[pos.xa(p)] = from_float<T>(dya * pr.cos_a()[p] + dyb * pr.sin_b()[p]);
      dx[pos.xb(p)] = from_float<T>(dyb * pr.cos_b()[p] - dya * pr.sin_a()[p]);
      if constexpr (kHasX) {
        const T* x = rows.x + i * pos.d;
        const float xa = to_float(x[pos.xa(p)]), xb = to_float(x[pos.xb(p)]);
        pr.dcos_a()[p] += dya * xa;
        pr.dcos_b()[p] += dyb * xb;
        pr.dsin_a()[p] -= dya * xb;
        pr.dsin_b()[p] += dyb * xa;
      }
    }
  }
}

// Sums back from pair order into a row.
template <class T>
void store_pairs_baseline(const PairPositions& pos, const float* a, const float* b, T* row) {
  for (int64_t p = 0; p < pos.d / 2; ++p) {
    row[pos.a(p)] = from_float<T>(a[p]);
    row[pos.b(p)] = from_float<T>(b[p]);
  }
}

OAO_AVX2 void add_to(float* acc, __m256 term) {
  _mm256_storeu_ps(acc, _mm256_add_ps(_mm256_loadu_ps(acc), term));
}
OAO_AVX2 void subtract_from(float* acc, __m256 term) {
  _mm256_storeu_ps(acc, _mm256_sub_ps(_mm256_loadu_ps(acc), term));
}

// The same with AVX2, run by run: a row has one run of pairs (two in mode 2), so the loop needs no
// position arithmetic. dy (like cos) takes layout kDy, x and dx kX. Rows go one after another:
// taking two at once would load and store the sums half as often, but walking two rows together
// measured 1.1x (bfloat16) to 2x (float32, mode 1) slower from memory. With x, each row first asks
// for the dy and x lines kPrefetchBytes ahead (the next rows, which follow in memory: the hardware
// prefetchers start over at every 4 KiB page): measured 5-15% faster for bfloat16, 0-10% for
// float32 (most with two threads). Without x it measured up to 20% slower for float32, so that path
// does not.
template <Layout kDy, Layout kX, bool kStream, bool kHasX, class T>
OAO_AVX2_TARGET void grad_rows_avx2(const PairPositions& pos, const Rows<T>& rows, const PairRow& pr) {
  constexpr int kV = kVectors<kDy>;
  constexpr int64_t kPrefetchBytes = 512, kLine = 64;
  const int64_t offset = pos.offset(), vec = vector_pairs<kDy>(offset);
  const int64_t row_bytes = pos.d * static_cast<int64_t>(sizeof(T));
  // Each run from its last pairs down where dx runs ahead of dy or x and both allow it (x is read in
  // dx's layout); a step's order does not change what the sums add, row after row.
  constexpr bool kMay = kMayDescend<kDy, kX, T> && (!kHasX || kMayDescend<kX, kX, T>);
  const bool descending =
      kMay && (store_runs_ahead(rows.dx, rows.dy) || (kHasX && store_runs_ahead(rows.dx, rows.x)));
  const int64_t first = descending ? vec - 8 * kV : 0, step = descending ? -8 * kV : 8 * kV;
  for (int64_t i = 0; i < rows.count; ++i) {
    if constexpr (kHasX) {
      // Prefetches never fault, so those past the last row need no check.
      const char* dy_ahead = reinterpret_cast<const char*>(rows.dy + i * pos.d) + kPrefetchBytes;
      const char* x_ahead = reinterpret_cast<const char*>(rows.x + i * pos.d) + kPrefetchBytes;
      for (int64_t k = 0; k < row_bytes; k += kLine) {
        _mm_prefetch(dy_ahead + k, _MM_HINT_T0);
        _mm_prefetch(x_ahead + k, _MM_HINT_T0);
      }
    }
    for (int64_t run = 0; run < pr.pairs; run += offset) {
      const T* dy = rows.dy + i * pos.d + pos.a(run);
      const T* x = kHasX ? rows.x + i * pos.d + pos.xa(run) : nullptr;
      T* dx = rows.dx + i * pos.d + pos.xa(run);
      const float *cos_a = pr.cos_a() + run, *cos_b = pr.cos_b() + run;
      const float *sin_a = pr.sin_a() + run, *sin_b = pr.sin_b() + run;
      float *dcos_a = pr.dcos_a() + run, *dcos_b = pr.dcos_b() + run;
      float *dsin_a = pr.dsin_a() + run, *dsin_b = pr.dsin_b() + run;
      for (int64_t q = vec; q < offset; ++q) {
        const float dya = to_float(dy[run_a<kDy>(q)]), dyb = to_float(dy[run_b<kDy>(q, offset)]);
        dx[run_a<kX>(q)] = from_float<T>(dya * cos_a[q] + dyb * sin_b[q]);
        dx[run_b<kX>(q, offset)] = from_float<T>(dyb * cos_b[q] - dya * sin_a[q]);
        if constexpr (kHasX) {
          const float xa = to_float(x[run_a<kX>(q)]), xb = to_float(x[run_b<kX>(q, offset)]);
          dcos_a[q] += dya * xa;
          dcos_b[q] += dyb * xb;
          dsin_a[q] -= dya * xb;
          dsin_b[q] += dyb * xa;
        }
      }
      for (int64_t j = first; j >= 0 && j < vec; j += step) {
        // Every load of the step comes before its stores: dx often sits at the same offset within
        // a 4 KiB page as dy and x, and a load behind a pending store to such an address stalls.
        __m256 dya[kV], dyb[kV], xa[kV], xb[kV], dxa[kV], dxb[kV];
        load_run<kDy>(dy, offset, j, dya, dyb);
        if constexpr (kHasX) load_run<kX>(x, offset, j, xa, xb);
        for (int v = 0; v < kV; ++v) {
          const int64_t q = j + 8 * v;
          dxa[v] = _mm256_add_ps(_mm256_mul_ps(dya[v], _mm256_loadu_ps(cos_a + q)),
                                 _mm256_mul_ps(dyb[v], _mm256_loadu_ps(sin_b + q)));
          dxb[v] = _mm256_sub_ps(_mm256_mul_ps(dyb[v], _mm256_loadu_ps(cos_b + q)),
                                 _mm256_mul_ps(dya[v], _mm256_loadu_ps(sin_a + q)));
          if constexpr (kHasX) {
            add_to(dcos_a + q, _mm256_mul_ps(dya[v], xa[v]));
            add_to(dcos_b + q, _mm256_mul_ps(dyb[v], xb[v]));
            subtract_from(dsin_a + q, _mm256_mul_ps(dya[v], xb[v]));
            add_to(dsin_b + q, _mm256_mul_ps(dyb[v], xa[v]));
          }
        }
        store_run<kX, kStream>(dx, offset, j, dxa, dxb);
      }
    }
  }
}

template <Layout kLayout, class T>
OAO_AVX2_TARGET void store_pairs_avx2(const PairPositions& pos, const float* a, const float* b, T* row) {
  constexpr int kV = kVectors<kLayout>;
  const int64_t offset = pos.offset(), vec = vector_pairs<kLayout>(offset);
  for (int64_t run = 0; run < pos.d / 2; run += offset) {
    T* base = row + pos.a(run);
    for (int64_t j = 0; j < vec; j += 8 * kV) {
      __m256 va[kV], vb[kV];
      for (int v = 0; v < kV; ++v) {
        va[v] = _mm256_loadu_ps(a + run + j + 8 * v);
        vb[v] = _mm256_loadu_ps(b + run + j + 8 * v);
      }
      store_run<kLayout, false>(base, offset, j, va, vb);
    }
    for (int64_t q = vec; q < offset; ++q) {
      base[run_a<kLayout>(q)] = from_float<T>(a[run + q]);
      base[run_b<kLayout>(q, offset)] = from_float<T>(b[run + q]);
    }
  }
}

// The loops of one path, all in the same pair order.
template <bool kHasX, class T>
struct Loops {
  void (*rows)(const PairPositions&, const Rows<T>&, const PairRow&);
  void (*load_pairs)(const PairPositions&, const T*, float*, float*);
  void (*store_pairs)(const PairPositions&, const float*, const float*, T*);
};

template <Layout kDy, Layout kX, bool kStream, bool kHasX, class T>
Loops<kHasX, T> avx2_loops() {
  return {grad_rows_avx2<kDy, kX, kStream, kHasX, T>, load_pairs_avx2<kDy, T>, store_pairs_avx2<kDy, T>};
}

template <bool kStream, bool kHasX, class T>
Loops<kHasX, T> pick_avx2_loops(const PairPositions& pos) {
  return visit_layouts<T>(pos, [](auto dy, auto x) {
    return avx2_loops<decltype(dy)::value, decltype(x)::value, kStream, kHasX, T>();
  });
}

template <bool kHasX, class T>
Loops<kHasX, T> pick_loops(const PairPositions& pos, bool stream) {
  if (!use_avx2()) {
    return {grad_rows_baseline<kHasX, T>, load_pairs_baseline<T>, store_pairs_baseline<T>};
  }
  return stream ? pick_avx2_loops<true, kHasX, T>(pos) : pick_avx2_loops<false, kHasX, T>(pos);
}

template <bool kHasX, class T>
void run(const T* dy, const T* cos, const T* sin, const T* x, T* dx, T* dcos, T* dsin, const RotaryPositionEmbeddingRows& rows,
         const PairPositions& pos, const Parallel& parallel) {
  const int64_t d = pos.d, pairs = d / 2;
  const RotaryPositionEmbeddingSplit split(rows, kHasX);
  const bool stream = pos.whole_vectors() && use_streaming(dx, rows.cos_rows() * rows.per_cos_row(), d);
  const auto loops = pick_loops<kHasX, T>(pos, stream);
  // With several chunks per cos row, each chunk's dcos/dsin go to its own slice, summed below.
  std::vector<float> partial(kHasX && split.chunks > 1 ? 2 * split.chunks * rows.cos_rows() * d : 0);
  const auto load = [&](int64_t c, const PairRow& pr) {
    loops.load_pairs(pos, cos + c * d, pr.cos_a(), pr.cos_b());
    loops.load_pairs(pos, sin + c * d, pr.sin_a(), pr.sin_b());
    if constexpr (kHasX) std::fill(pr.dcos_a(), pr.dcos_a() + 2 * d, 0.f);
  };
  const auto run_rows = [&](int64_t r, int64_t count, const PairRow& pr) {
    loops.rows(pos, Rows<T>{dy + r, kHasX ? x + r : nullptr, dx + r, count}, pr);
  };
  const auto store = [&](int64_t chunk, int64_t c, const PairRow& pr) {
    if constexpr (kHasX) {
      if (split.chunks == 1) {
        loops.store_pairs(pos, pr.dcos_a(), pr.dcos_b(), dcos + c * d);
        loops.store_pairs(pos, pr.dsin_a(), pr.dsin_b(), dsin + c * d);
      } else {
        float* slice = partial.data() + 2 * (chunk * rows.cos_rows() + c) * d;
        std::copy(pr.dcos_a(), pr.dcos_a() + 2 * d, slice);  // dcos then dsin, in pair order
      }
    }
  };
  const int64_t floats = (kHasX ? 8 : 4) * pairs;  // cos and sin, and with x dcos and dsin
  for_each_cos_block(rows, split, d, floats, stream, parallel, load, run_rows, store);

  if (!kHasX || split.chunks == 1) return;
  parallel.for_each(static_cast<size_t>(split.groups), [&](size_t group) {
    std::vector<float> sum(2 * d);
    for (int64_t c = block_begin(group, split.groups, rows.cos_rows());
         c < block_begin(group + 1, split.groups, rows.cos_rows()); ++c) {
      std::fill(sum.begin(), sum.end(), 0.f);
      for (int64_t k = 0; k < split.chunks; ++k) {
        const float* slice = partial.data() + 2 * (k * rows.cos_rows() + c) * d;
        for (int64_t j = 0; j < 2 * d; ++j) sum[j] += slice[j];
      }
      loops.store_pairs(pos, sum.data(), sum.data() + pairs, dcos + c * d);
      loops.store_pairs(pos, sum.data() + 2 * pairs, sum.data() + 3 * pairs, dsin + c * d);
    }
  });
}

}  // namespace

template <class T>
void rotary_position_embedding_grad(const T* dy, const T* cos, const T* sin, const T* x, T* dx, T* dcos,
                                    T* dsin, const std::vector<int64_t>& dy_shape,
                                    const std::vector<int64_t>& cos_shape, int mode,
                                    const Parallel& parallel) {
  const RotaryPositionEmbeddingRows rows(dy_shape, cos_shape);
  const PairPositions pos{static_cast<RotaryPositionEmbeddingMode>(mode), dy_shape.back()};
  if (x != nullptr && pos.d > 0) {
    // Rows of cos that no dy row reads (there are none unless dy is empty) must still be zero.
    if (rows.cos_rows() == 0) {
      int64_t n = 1;
      for (int64_t s : cos_shape) n *= s;
      std::fill(dcos, dcos + n, from_float<T>(0.f));
      std::fill(dsin, dsin + n, from_float<T>(0.f));
      return;
    }
    run<true>(dy, cos, sin, x, dx, dcos, dsin, rows, pos, parallel);
  } else if (pos.d > 0) {
    run<false>(dy, cos, sin, x, dx, dcos, dsin, rows, pos, parallel);
  }
}

template void rotary_position_embedding_grad<float>(const float*, const float*, const float*, const float*,
                                                    float*, float*, float*, const std::vector<int64_t>&,
                                                    const std::vector<int64_t>&, int, const Parallel&);
template void rotary_position_embedding_grad<half>(const half*, const half*, const half*, const half*, half*,
                                                   half*, half*, const std::vector<int64_t>&,
                                                   const std::vector<int64_t>&, int, const Parallel&);
template void rotary_position_embedding_grad<bfloat16>(const bfloat16*, const bfloat16*, const bfloat16*,
                                                       const bfloat16*, bfloat16*, bfloat16*, bfloat16*,
                                                       const std::vector<int64_t>&,
                                                       const std::vector<int64_t>&, int, const Parallel&);

}  // namespace oao
