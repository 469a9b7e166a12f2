#include "kernels/rms_norm_grad.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/element.h"
#include "kernels/rms_norm_gamma.h"
#include "kernels/row.h"
#include "kernels/vec.h"
#include "kernels/vec512.h"

namespace oao {
namespace {

// Rows [begin, end) of one block: dx, and dgamma_part += dy * xhat row by row, in row order.
// Per row, pass 1 sums dy*gamma*xhat (and feeds dgamma); pass 2, over the same row while it is
// still in L1/L2, writes dx. gamma_f is gamma in float32.
template <class T>
void grad_rows_baseline(const T* dy, const T* x, const float* rstd, const float* gamma_f, bool, T* dx,
                        float* dgamma_part, int64_t begin, int64_t end, int64_t cols) {
  for (int64_t r = begin; r < end; ++r) {
    const T* dy_row = dy + r * cols;
    const T* x_row = x + r * cols;
    const float rs = rstd[r];
    float lanes[8] = {};
    for (int64_t j = 0; j < cols; ++j) {
      const float dyx = to_float(dy_row[j]) * (to_float(x_row[j]) * rs);
      lanes[j % 8] += dyx * gamma_f[j];
      dgamma_part[j] += dyx;
    }
    float dot = 0.f;
    for (float l : lanes) dot += l;
    const float scaled_mean = dot / static_cast<float>(cols) * rs;
    for (int64_t j = 0; j < cols; ++j) {
      dx[r * cols + j] =
          from_float<T>(rs * (to_float(dy_row[j]) * gamma_f[j] - to_float(x_row[j]) * scaled_mean));
    }
  }
}

// One row as the AVX2 loops see it. Pass 1 fills in `dot`, the sum of dy * gamma * xhat; `ahead`,
// if set, is what pass 2 prefetches (see dx_row).
template <class T>
struct Row {
  const T* dy;
  const T* x;
  T* dx;
  float rs;
  float dot;
  const T* ahead;
};

// Pass 1 over kRows rows: their dot sums, and dy * xhat added into dgamma_l, one sum per column over
// the rows in order (doing two rows at once halves the loads and stores of dgamma_l). gamma_l and
// dgamma_l are in the lane order of T.
template <int kRows, class T>
OAO_AVX2_TARGET void dot_rows(Row<T>* rows, const float* gamma_l, float* dgamma_l, int64_t cols) {
  const int64_t vec_end = cols - cols % 16;
  __m256 vrs[kRows], acc_lo[kRows], acc_hi[kRows];
  for (int i = 0; i < kRows; ++i) {
    vrs[i] = _mm256_set1_ps(rows[i].rs);
    acc_lo[i] = acc_hi[i] = _mm256_setzero_ps();
  }
  for (int64_t j = 0; j < vec_end; j += 16) {
    const __m256 g_lo = _mm256_loadu_ps(gamma_l + j), g_hi = _mm256_loadu_ps(gamma_l + j + 8);
    __m256 sum_lo, sum_hi;
    for (int i = 0; i < kRows; ++i) {
      __m256 dy_lo, dy_hi, x_lo, x_hi;
      load16(rows[i].dy + j, dy_lo, dy_hi);
      load16(rows[i].x + j, x_lo, x_hi);
      const __m256 p_lo = _mm256_mul_ps(dy_lo, _mm256_mul_ps(x_lo, vrs[i]));
      const __m256 p_hi = _mm256_mul_ps(dy_hi, _mm256_mul_ps(x_hi, vrs[i]));
      acc_lo[i] = _mm256_add_ps(acc_lo[i], _mm256_mul_ps(p_lo, g_lo));
      acc_hi[i] = _mm256_add_ps(acc_hi[i], _mm256_mul_ps(p_hi, g_hi));
      sum_lo = i == 0 ? p_lo : _mm256_add_ps(sum_lo, p_lo);
      sum_hi = i == 0 ? p_hi : _mm256_add_ps(sum_hi, p_hi);
    }
    _mm256_storeu_ps(dgamma_l + j, _mm256_add_ps(_mm256_loadu_ps(dgamma_l + j), sum_lo));
    _mm256_storeu_ps(dgamma_l + j + 8, _mm256_add_ps(_mm256_loadu_ps(dgamma_l + j + 8), sum_hi));
  }
  for (int i = 0; i < kRows; ++i) rows[i].dot = hsum(_mm256_add_ps(acc_lo[i], acc_hi[i]));
  for (int64_t j = vec_end; j < cols; ++j) {
    float sum = 0.f;
    for (int i = 0; i < kRows; ++i) {
      const float p = to_float(rows[i].dy[j]) * (to_float(rows[i].x[j]) * rows[i].rs);
      rows[i].dot += p * gamma_l[j];
      sum = i == 0 ? p : sum + p;
    }
    dgamma_l[j] += sum;
  }
}

// Pass 2: dx of one row whose inputs pass 1 has just brought into cache, 16 columns at a time from
// the first or, if `descending`, from the last (see store_runs_ahead). Rows are written one after
// the other, never two at once: at row widths of a multiple of 4 KiB every row starts at the same
// page offset, and streaming stores to two such rows in turn measured 1.4-2.2x slower in bfloat16
// (the write-combining of one row's line is broken by the other's store to the same offset). For
// 16-bit types, whose conversions make this pass compute-bound, it also prefetches the row's `ahead`
// (2 * cols elements: the next pair's dy or x) so that memory keeps streaming meanwhile. The
// prefetches go to L2, where they do not evict this pass's own inputs from L1 (measured faster than
// into L1); for float32 they measured no faster than the hardware prefetcher.
template <bool kStream, bool kInputNaN, class T>
OAO_AVX2_TARGET void dx_row(const Row<T>& row, const float* gamma_l, int64_t cols, bool descending) {
  const int64_t vec_end = cols - cols % 16;
  const float scaled_mean = row.dot / static_cast<float>(cols) * row.rs;
  const __m256 vrs = _mm256_set1_ps(row.rs), vmean = _mm256_set1_ps(scaled_mean);
  const int64_t step = descending ? -16 : 16;
  for (int64_t j = descending ? vec_end - 16 : 0; j >= 0 && j < vec_end; j += step) {
    if (sizeof(T) == 2 && row.ahead != nullptr)
      _mm_prefetch(reinterpret_cast<const char*>(row.ahead + 2 * j), _MM_HINT_T2);
    __m256 dy_lo, dy_hi, x_lo, x_hi;
    load16(row.dy + j, dy_lo, dy_hi);
    load16(row.x + j, x_lo, x_hi);
    const __m256 dx_lo =
        _mm256_sub_ps(_mm256_mul_ps(dy_lo, _mm256_loadu_ps(gamma_l + j)), _mm256_mul_ps(x_lo, vmean));
    const __m256 dx_hi =
        _mm256_sub_ps(_mm256_mul_ps(dy_hi, _mm256_loadu_ps(gamma_l + j + 8)), _mm256_mul_ps(x_hi, vmean));
    store16<kStream, kInputNaN>(row.dx + j, _mm256_mul_ps(vrs, dx_lo), _mm256_mul_ps(vrs, dx_hi));
  }
  for (int64_t j = vec_end; j < cols; ++j) {
    row.dx[j] = from_float<T>(row.rs * (to_float(row.dy[j]) * gamma_l[j] - to_float(row.x[j]) * scaled_mean));
  }
}

// dot_rows on 16 lanes, gamma and dgamma in memory order: every product and every per-lane sum is
// dot_rows', so the dot sums, added as AVX2 adds them (hsum_as_avx2), and dgamma are its bits.
template <int kRows, class T>
OAO_AVX512_TARGET void dot_rows_avx512(Row<T>* rows, const float* gamma, float* dgamma, int64_t cols) {
  const int64_t vec_end = cols - cols % 16;
  __m512 vrs[kRows], acc[kRows];
  for (int i = 0; i < kRows; ++i) {
    vrs[i] = _mm512_set1_ps(rows[i].rs);
    acc[i] = _mm512_setzero_ps();
  }
  for (int64_t j = 0; j < vec_end; j += 16) {
    const __m512 g = _mm512_loadu_ps(gamma + j);
    __m512 sum;
    for (int i = 0; i < kRows; ++i) {
      const __m512 p = _mm512_mul_ps(load16_512(rows[i].dy + j), _mm512_mul_ps(load16_512(rows[i].x + j), vrs[i]));
      acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(p, g));
      sum = i == 0 ? p : _mm512_add_ps(sum, p);
    }
    _mm512_storeu_ps(dgamma + j, _mm512_add_ps(_mm512_loadu_ps(dgamma + j), sum));
  }
  for (int i = 0; i < kRows; ++i) rows[i].dot = hsum_as_avx2<T>(acc[i]);
  for (int64_t j = vec_end; j < cols; ++j) {
    float sum = 0.f;
    for (int i = 0; i < kRows; ++i) {
      const float p = to_float(rows[i].dy[j]) * (to_float(rows[i].x[j]) * rows[i].rs);
      rows[i].dot += p * gamma[j];
      sum = i == 0 ? p : sum + p;
    }
    dgamma[j] += sum;
  }
}

// dx_row on 16 lanes, gamma in memory order.
template <bool kStream, bool kInputNaN, class T>
OAO_AVX512_TARGET void dx_row_avx512(const Row<T>& row, const float* gamma, int64_t cols, bool descending) {
  const int64_t vec_end = cols - cols % 16;
  const float scaled_mean = row.dot / static_cast<float>(cols) * row.rs;
  const __m512 vrs = _mm512_set1_ps(row.rs), vmean = _mm512_set1_ps(scaled_mean);
  const int64_t step = descending ? -16 : 16;
  for (int64_t j = descending ? vec_end - 16 : 0; j >= 0 && j < vec_end; j += step) {
    if (sizeof(T) == 2 && row.ahead != nullptr)
      _mm_prefetch(reinterpret_cast<const char*>(row.ahead + 2 * j), _MM_HINT_T2);
    const __m512 dx = _mm512_sub_ps(_mm512_mul_ps(load16_512(row.dy + j), _mm512_loadu_ps(gamma + j)),
                                    _mm512_mul_ps(load16_512(row.x + j), vmean));
    store16_512<kStream, kInputNaN>(row.dx + j, _mm512_mul_ps(vrs, dx));
  }
  for (int64_t j = vec_end; j < cols; ++j) {
    row.dx[j] = from_float<T>(row.rs * (to_float(row.dy[j]) * gamma[j] - to_float(row.x[j]) * scaled_mean));
  }
}

// dx_row, checking its NaNs only where an input may hold one: a bfloat16 row with a finite rstd and
// a finite dot sum (inf * 0 is NaN, so no dy or x of the row is infinite or NaN), and a finite
// gamma, has none (see round_to_bf16_high).
template <bool kWide, bool kStream, class T>
void dx_row_checked(const Row<T>& row, const float* gamma_l, int64_t cols, bool descending,
                    bool gamma_finite) {
  const auto dx = [&](auto input_nan) {
    if constexpr (kWide) return dx_row_avx512<kStream, input_nan.value>(row, gamma_l, cols, descending);
    return dx_row<kStream, input_nan.value>(row, gamma_l, cols, descending);
  };
  if constexpr (std::is_same_v<T, bfloat16>) {
    if (gamma_finite && std::isfinite(row.rs) && std::isfinite(row.dot)) return dx(std::false_type{});
  }
  dx(std::true_type{});
}

template <bool kWide, int kRows, class T>
void dot_rows_on(Row<T>* rows, const float* gamma_l, float* dgamma_l, int64_t cols) {
  if constexpr (kWide) return dot_rows_avx512<kRows>(rows, gamma_l, dgamma_l, cols);
  dot_rows<kRows>(rows, gamma_l, dgamma_l, cols);
}

// Rows go in pairs, the last alone if their count is odd, on the AVX2 loops or (kWide) the AVX-512
// ones. gamma_l and dgamma_part are in the lane order of T on entry (memory order for kWide);
// dgamma_part is left in memory order.
template <bool kWide, bool kStream, class T>
void grad_rows_vec(const T* dy, const T* x, const float* rstd, const float* gamma_l, bool gamma_finite,
                    T* dx, float* dgamma_part, int64_t begin, int64_t end, int64_t cols) {
  // Every row has the same offset between dx and dy (or x), so all take the same direction.
  const bool descending = store_runs_ahead(dx, dy) || store_runs_ahead(dx, x);
  int64_t r = begin;
  for (; r + 2 <= end; r += 2) {
    Row<T> rows[2];
    for (int64_t i = 0; i < 2; ++i) {
      rows[i] = {dy + (r + i) * cols, x + (r + i) * cols, dx + (r + i) * cols, rstd[r + i], 0.f, nullptr};
    }
    if (r + 4 <= end) {
      rows[0].ahead = dy + (r + 2) * cols;
      rows[1].ahead = x + (r + 2) * cols;
    }
    dot_rows_on<kWide, 2>(rows, gamma_l, dgamma_part, cols);
    for (const Row<T>& row : rows) dx_row_checked<kWide, kStream>(row, gamma_l, cols, descending, gamma_finite);
  }
  if (r < end) {
    Row<T> row{dy + r * cols, x + r * cols, dx + r * cols, rstd[r], 0.f, nullptr};
    dot_rows_on<kWide, 1>(&row, gamma_l, dgamma_part, cols);
    dx_row_checked<kWide, kStream>(row, gamma_l, cols, descending, gamma_finite);
  }
  if constexpr (kStream) _mm_sfence();
  if constexpr (!kWide) from_lane_order<T>(dgamma_part, cols);
}

}  // namespace

template <class T, class TG>
void rms_norm_grad(const T* dy, const T* x, const float* rstd, const TG* gamma, T* dx, float* dgamma,
                   int64_t rows, int64_t cols, const Parallel& parallel) {
  if (cols == 0) return;
  std::fill(dgamma, dgamma + cols, 0.f);
  if (rows == 0) return;

  const bool wide = use_avx512(), stream = use_streaming(dx, rows, cols);
  const RmsNormGamma<T> g(gamma, cols, use_avx2() && !wide);
  const auto rows_fn = !use_avx2() ? grad_rows_baseline<T>
                       : wide      ? (stream ? grad_rows_vec<true, true, T> : grad_rows_vec<true, false, T>)
                                   : (stream ? grad_rows_vec<false, true, T> : grad_rows_vec<false, false, T>);

  // Each block adds its rows into its own partial dgamma; the partials are then summed in block
  // order. Blocks depend only on the shape, so the sums are the same for any thread count.
  const size_t blocks = block_count(static_cast<size_t>(rows), static_cast<size_t>(cols));
  std::vector<float> partial(blocks * static_cast<size_t>(cols), 0.f);
  parallel.for_each(blocks, [&](size_t b) {
    rows_fn(dy, x, rstd, g.f.data(), g.finite, dx, partial.data() + b * cols, block_begin(b, blocks, rows),
            block_begin(b + 1, blocks, rows), cols);
  });

  const size_t strips = block_count(static_cast<size_t>(cols), blocks);
  parallel.for_each(strips, [&](size_t s) {
    sum_partials(partial.data(), blocks, cols, block_begin(s, strips, cols), block_begin(s + 1, strips, cols),
                 dgamma);
  });
}

template void rms_norm_grad<float, float>(const float*, const float*, const float*, const float*, float*,
                                          float*, int64_t, int64_t, const Parallel&);
template void rms_norm_grad<half, half>(const half*, const half*, const float*, const half*, half*, float*,
                                        int64_t, int64_t, const Parallel&);
template void rms_norm_grad<half, float>(const half*, const half*, const float*, const float*, half*, float*,
                                         int64_t, int64_t, const Parallel&);
template void rms_norm_grad<bfloat16, bfloat16>(const bfloat16*, const bfloat16*, const float*,
                                                const bfloat16*, bfloat16*, float*, int64_t, int64_t,
                                                const Parallel&);
template void rms_norm_grad<bfloat16, float>(const bfloat16*, const bfloat16*, const float*, const float*,
                                             bfloat16*, float*, int64_t, int64_t, const Parallel&);

}  // namespace oao
