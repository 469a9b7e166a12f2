#include "kernels/rotary_position_embedding_grad.h"

#include <algorithm>

#include "kernels/rope_pairs.h"
#include "kernels/row.h"

namespace oao {
namespace {

// One cos row's cos and sin in pair order, and its dcos / dsin sums, all float32.
struct PairRow {
  explicit PairRow(int64_t pairs) : data(8 * pairs, 0.f), pairs(pairs) {}
  float* cos_a() { return data.data(); }
  float* cos_b() { return data.data() + pairs; }
  float* sin_a() { return data.data() + 2 * pairs; }
  float* sin_b() { return data.data() + 3 * pairs; }
  float* dcos_a() { return data.data() + 4 * pairs; }
  float* dcos_b() { return data.data() + 5 * pairs; }
  float* dsin_a() { return data.data() + 6 * pairs; }
  float* dsin_b() { return data.data() + 7 * pairs; }

  std::vector<float> data;
  int64_t pairs;
};

// Up to two dy rows of one cos row (taken together so that the dcos/dsin sums are loaded and stored
// once per two rows), with their x and dx rows.
template <class T>
struct Rows {
  int count;
  const T* dy[2];
  const T* x[2];
  T* dx[2];
};

// dx[a] = dy[a] cos[a] + dy[b] sin[b] and dx[b] = dy[b] cos[b] - dy[a] sin[a] (a and b at x's
// positions for dx); with x, the rows' terms of dcos and dsin, row by row.
template <bool kHasX, class T>
void grad_rows_baseline(const PairPositions& pos, const Rows<T>& rows, PairRow& pr) {
  for (int i = 0; i < rows.count; ++i) {
    const T *dy = rows.dy[i], *x = rows.x[i];
    for (int64_t p = 0; p < pr.pairs; ++p) {
      const float dya = to_float(dy[pos.a(p)]), dyb = to_float(dy[pos.b(p)]);
      rows.dx[i][pos.xa(p)] = from_float<T>(dya * pr.cos_a()[p] + dyb * pr.sin_b()[p]);
      rows.dx[i][pos.xb(p)] = from_float<T>(dyb * pr.cos_b()[p] - dya * pr.sin_a()[p]);
      if constexpr (kHasX) {
        const float xa = to_float(x[pos.xa(p)]), xb = to_float(x[pos.xb(p)]);
        pr.dcos_a()[p] += dya * xa;
        pr.dcos_b()[p] += dyb * xb;
        pr.dsin_a()[p] -= dya * xb;
        pr.dsin_b()[p] += dyb * xa;
      }
    }
  }
}

OAO_AVX2 void add_to(float* acc, __m256 term) {
  _mm256_storeu_ps(acc, _mm256_add_ps(_mm256_loadu_ps(acc), term));
}
OAO_AVX2 void subtract_from(float* acc, __m256 term) {
  _mm256_storeu_ps(acc, _mm256_sub_ps(_mm256_loadu_ps(acc), term));
}

// The same, 8 pairs at a time, kRows rows together. dy is split except in mode 1; x and dx are
// split in modes 0 and 2.
template <int kRows, bool kStream, bool kHasX, bool kSplitDy, bool kSplitX, class T>
__attribute__((target("avx2,fma,f16c"))) void grad_rows_avx2(const PairPositions& pos, const Rows<T>& rows,
                                                             PairRow& pr) {
  const int64_t offset = pos.offset();
  for (int64_t p = 0; p < pr.pairs; p += 8) {
    const int64_t a = pos.a(p);
    const __m256 ca = _mm256_loadu_ps(pr.cos_a() + p), cb = _mm256_loadu_ps(pr.cos_b() + p);
    const __m256 sa = _mm256_loadu_ps(pr.sin_a() + p), sb = _mm256_loadu_ps(pr.sin_b() + p);
    __m256 cos_a_sum, cos_b_sum, sin_a_sum, sin_b_sum;
    for (int i = 0; i < kRows; ++i) {
      // Every load of the step comes before its stores: dx often sits at the same offset within
      // a 4 KiB page as dy and x, and a load behind a pending store to such an address stalls.
      __m256 dya, dyb, xa, xb;
      if constexpr (kSplitDy) {
        load_split(rows.dy[i], a, offset, dya, dyb);
      } else {
        load_interleaved(rows.dy[i], p, dya, dyb);
      }
      if constexpr (kHasX && kSplitX) {
        load_split(rows.x[i], a, offset, xa, xb);
      } else if constexpr (kHasX) {
        load_interleaved(rows.x[i], p, xa, xb);
      }
      const __m256 dxa = _mm256_add_ps(_mm256_mul_ps(dya, ca), _mm256_mul_ps(dyb, sb));
      const __m256 dxb = _mm256_sub_ps(_mm256_mul_ps(dyb, cb), _mm256_mul_ps(dya, sa));
      if constexpr (kHasX) {
        const __m256 terms[4] = {_mm256_mul_ps(dya, xa), _mm256_mul_ps(dyb, xb), _mm256_mul_ps(dya, xb),
                                 _mm256_mul_ps(dyb, xa)};
        cos_a_sum = i == 0 ? terms[0] : _mm256_add_ps(cos_a_sum, terms[0]);
        cos_b_sum = i == 0 ? terms[1] : _mm256_add_ps(cos_b_sum, terms[1]);
        sin_a_sum = i == 0 ? terms[2] : _mm256_add_ps(sin_a_sum, terms[2]);
        sin_b_sum = i == 0 ? terms[3] : _mm256_add_ps(sin_b_sum, terms[3]);
      }
      if constexpr (kSplitX) {
        store_split<kStream>(rows.dx[i], a, offset, dxa, dxb);
      } else {
        store_interleaved<kStream>(rows.dx[i], p, dxa, dxb);
      }
    }
    if constexpr (kHasX) {
      add_to(pr.dcos_a() + p, cos_a_sum);
      add_to(pr.dcos_b() + p, cos_b_sum);
      subtract_from(pr.dsin_a() + p, sin_a_sum);
      add_to(pr.dsin_b() + p, sin_b_sum);
    }
  }
}

template <bool kStream, bool kHasX, bool kSplitDy, bool kSplitX, class T>
void grad_rows_avx2(const PairPositions& pos, const Rows<T>& rows, PairRow& pr) {
  if (rows.count == 2) {
    grad_rows_avx2<2, kStream, kHasX, kSplitDy, kSplitX>(pos, rows, pr);
  } else {
    grad_rows_avx2<1, kStream, kHasX, kSplitDy, kSplitX>(pos, rows, pr);
  }
}

template <bool kHasX, class T>
using RowFn = void (*)(const PairPositions&, const Rows<T>&, PairRow&);

template <bool kStream, bool kHasX, class T>
RowFn<kHasX, T> pick_avx2_row_fn(const PairPositions& pos) {
  switch (pos.mode) {
    case RopeMode::kHalf:
    case RopeMode::kQuarter:
      return grad_rows_avx2<kStream, kHasX, true, true, T>;
    case RopeMode::kInterleave:
      return grad_rows_avx2<kStream, kHasX, false, false, T>;
    case RopeMode::kInterleaveHalf:
      break;
  }
  return grad_rows_avx2<kStream, kHasX, true, false, T>;
}

template <bool kHasX, class T>
RowFn<kHasX, T> pick_row_fn(const PairPositions& pos, bool stream) {
  if (!use_avx2() || !pos.vectorizable()) return grad_rows_baseline<kHasX, T>;
  return stream ? pick_avx2_row_fn<true, kHasX, T>(pos) : pick_avx2_row_fn<false, kHasX, T>(pos);
}

template <class T>
void load_pairs(const PairPositions& pos, const T* row, float* a, float* b) {
  for (int64_t p = 0; p < pos.d / 2; ++p) {
    a[p] = to_float(row[pos.a(p)]);
    b[p] = to_float(row[pos.b(p)]);
  }
}

template <class T>
void store_pairs(const PairPositions& pos, const float* a, const float* b, T* row) {
  for (int64_t p = 0; p < pos.d / 2; ++p) {
    row[pos.a(p)] = from_float<T>(a[p]);
    row[pos.b(p)] = from_float<T>(b[p]);
  }
}

template <bool kHasX, class T>
void run(const T* dy, const T* cos, const T* sin, const T* x, T* dx, T* dcos, T* dsin, const RopeRows& rows,
         const PairPositions& pos, const Parallel& parallel) {
  const int64_t d = pos.d;
  const RopeSplit split(rows, kHasX ? 2 * d * static_cast<int64_t>(sizeof(float)) : 0);
  const int64_t dy_rows = rows.cos_rows() * rows.per_cos_row();
  const bool stream = use_streaming(dx, dy_rows, d);
  const auto row_fn = pick_row_fn<kHasX, T>(pos, stream);
  // With several chunks per cos row, each chunk's dcos/dsin go to its own slice, summed below.
  std::vector<float> partial(kHasX && split.chunks > 1 ? 2 * split.chunks * rows.cos_rows() * d : 0);

  parallel.for_each(static_cast<size_t>(split.tasks()), [&](size_t task) {
    const int64_t group = static_cast<int64_t>(task) / split.chunks,
                  chunk = static_cast<int64_t>(task) % split.chunks;
    const int64_t m_begin = block_begin(chunk, split.chunks, rows.per_cos_row());
    const int64_t m_end = block_begin(chunk + 1, split.chunks, rows.per_cos_row());
    PairRow pr(d / 2);
    for (int64_t c = block_begin(group, split.groups, rows.cos_rows());
         c < block_begin(group + 1, split.groups, rows.cos_rows()); ++c) {
      load_pairs(pos, cos + c * d, pr.cos_a(), pr.cos_b());
      load_pairs(pos, sin + c * d, pr.sin_a(), pr.sin_b());
      if constexpr (kHasX) std::fill(pr.dcos_a(), pr.dcos_a() + 4 * pr.pairs, 0.f);
      for (int64_t m = m_begin; m < m_end; m += 2) {
        Rows<T> batch{static_cast<int>(std::min<int64_t>(2, m_end - m)), {}, {}, {}};
        for (int i = 0; i < batch.count; ++i) {
          const int64_t r = rows.dy_row(c, m + i) * d;
          batch.dy[i] = dy + r;
          batch.x[i] = kHasX ? x + r : nullptr;
          batch.dx[i] = dx + r;
        }
        row_fn(pos, batch, pr);
      }
      if constexpr (kHasX) {
        if (split.chunks == 1) {
          store_pairs(pos, pr.dcos_a(), pr.dcos_b(), dcos + c * d);
          store_pairs(pos, pr.dsin_a(), pr.dsin_b(), dsin + c * d);
        } else {
          float* slice = partial.data() + 2 * (chunk * rows.cos_rows() + c) * d;
          std::copy(pr.dcos_a(), pr.dcos_a() + 2 * d, slice);  // dcos then dsin, in pair order
        }
      }
    }
    if (stream) _mm_sfence();  // streaming stores are weakly ordered: finish them before the join
  });

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
      const int64_t pairs = d / 2;
      store_pairs(pos, sum.data(), sum.data() + pairs, dcos + c * d);
      store_pairs(pos, sum.data() + 2 * pairs, sum.data() + 3 * pairs, dsin + c * d);
    }
  });
}

}  // namespace

template <class T>
void rotary_position_embedding_grad(const T* dy, const T* cos, const T* sin, const T* x, T* dx, T* dcos,
                                    T* dsin, const std::vector<int64_t>& dy_shape,
                                    const std::vector<int64_t>& cos_shape, int mode,
                                    const Parallel& parallel) {
  const RopeRows rows(dy_shape, cos_shape);
  const PairPositions pos{static_cast<RopeMode>(mode), dy_shape.back()};
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
