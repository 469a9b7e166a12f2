#include "kernels/rms_norm.h"

#include <algorithm>
#include <cmath>

#include "kernels/element.h"
#include "kernels/rms_norm_gamma.h"
#include "kernels/row.h"
#include "kernels/vec.h"

namespace oao {
namespace {

// The mean square of zero elements is taken as 0, so an empty row gets rstd = 1/sqrt(epsilon).
float rstd_of(float sum_sq, int64_t cols, float epsilon) {
  const float mean_sq = cols == 0 ? 0.f : sum_sq / static_cast<float>(cols);
  return 1.f / std::sqrt(mean_sq + epsilon);
}

// rstd of a row whose float32 sum of squares is sum_sq. That sum overflows for finite values as
// small as 1e19 (D = 16): such a row is summed again in float64, whose range holds the square of
// every float32, so that rstd is the formula's. A row with Inf or NaN keeps its float32 result.
template <class T>
float rstd_of_row(const T* x_row, int64_t cols, float sum_sq, float epsilon) {
  if (std::isfinite(sum_sq)) return rstd_of(sum_sq, cols, epsilon);
  double sum = 0.0;
  for (int64_t j = 0; j < cols; ++j) sum += static_cast<double>(to_float(x_row[j])) * to_float(x_row[j]);
  if (!std::isfinite(sum)) return rstd_of(sum_sq, cols, epsilon);
  return static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(cols) + epsilon));
}

template <class T>
void norm_rows_baseline(const T* x, const float* gamma_f, bool, float epsilon, T* y, float* rstd,
                        int64_t begin, int64_t end, int64_t cols) {
  for (int64_t r = begin; r < end; ++r) {
    const T* x_row = x + r * cols;
    float lanes[8] = {};
    for (int64_t j = 0; j < cols; ++j) lanes[j % 8] += to_float(x_row[j]) * to_float(x_row[j]);
    float sum_sq = 0.f;
    for (float l : lanes) sum_sq += l;
    const float rs = rstd[r] = rstd_of_row(x_row, cols, sum_sq, epsilon);
    for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = from_float<T>(to_float(x_row[j]) * rs * gamma_f[j]);
  }
}

// The float32 sum of squares of a row's first vec_end (a multiple of 16) columns, 16 at a time.
template <class T>
struct SquareSums {
  __m256 lo, hi;

  OAO_AVX2 void add(const T* p) {
    __m256 a, b;
    load16(p, a, b);
    lo = _mm256_add_ps(lo, _mm256_mul_ps(a, a));
    hi = _mm256_add_ps(hi, _mm256_mul_ps(b, b));
  }
  // With the columns past vec_end added one by one.
  OAO_AVX2 float total(const T* row, int64_t vec_end, int64_t cols) const {
    float sum = hsum(_mm256_add_ps(lo, hi));
    for (int64_t j = vec_end; j < cols; ++j) sum += to_float(row[j]) * to_float(row[j]);
    return sum;
  }
};

// y of one row, 16 columns at a time from the first or, if `descending`, from the last (see
// store_runs_ahead), while summing the squares of `next`, the following row, from its first: one
// row streams in from memory while the one before, already in L1, is scaled and written (in two
// passes, summing a row and then writing it, memory idled during the writing, which bfloat16's
// conversions make the longer half). The sums take the order of a row summed alone. For 16-bit
// types, whose conversions leave each step too short to hide memory's latency, the next row's lines
// are asked for kPrefetchBytes ahead of its loads (the hardware prefetchers start over at every 4
// KiB page): bfloat16 8192x4096 measured 13-17 -> 11-13 ms on one thread, 7.7-8.3 -> 6.4-7.9 on two.
template <bool kStream, bool kNext, bool kInputNaN, class T>
OAO_AVX2_TARGET float scale_row(const T* x_row, const float* gamma_l, float rs, T* y_row, const T* next,
                                int64_t cols, bool descending) {
  const int64_t vec_end = cols - cols % 16;
  const __m256 vrs = _mm256_set1_ps(rs);
  SquareSums<T> sums{_mm256_setzero_ps(), _mm256_setzero_ps()};
  constexpr int64_t kPrefetchBytes = 2048;
  for (int64_t k = 0; k < vec_end; k += 16) {
    if constexpr (kNext && sizeof(T) == 2) {
      _mm_prefetch(reinterpret_cast<const char*>(next + k) + kPrefetchBytes, _MM_HINT_T0);
    }
    if constexpr (kNext) sums.add(next + k);
    const int64_t j = descending ? vec_end - 16 - k : k;
    __m256 lo, hi;
    load16(x_row + j, lo, hi);
    store16<kStream, kInputNaN>(y_row + j,
                                _mm256_mul_ps(_mm256_mul_ps(lo, vrs), _mm256_loadu_ps(gamma_l + j)),
                                _mm256_mul_ps(_mm256_mul_ps(hi, vrs), _mm256_loadu_ps(gamma_l + j + 8)));
  }
  for (int64_t j = vec_end; j < cols; ++j) y_row[j] = from_float<T>(to_float(x_row[j]) * rs * gamma_l[j]);
  return kNext ? sums.total(next, vec_end, cols) : 0.f;
}

// Row r's scale_row, checking its NaNs only where an input may hold one: bfloat16 rows whose sum
// of squares is finite, with a finite gamma, have none (see round_to_bf16_high).
template <bool kStream, bool kNext, class T>
OAO_AVX2_TARGET float scale_row_checked(const T* x_row, const float* gamma_l, float rs, T* y_row,
                                        const T* next, int64_t cols, bool descending, bool finite) {
  if constexpr (kInterleaved<T>) {
    if (finite) return scale_row<kStream, kNext, false, T>(x_row, gamma_l, rs, y_row, next, cols, descending);
  }
  return scale_row<kStream, kNext, true, T>(x_row, gamma_l, rs, y_row, next, cols, descending);
}

// gamma_l is in the lane order of T.
template <bool kStream, class T>
OAO_AVX2_TARGET void norm_rows_avx2(const T* x, const float* gamma_l, bool gamma_finite, float epsilon, T* y,
                                    float* rstd, int64_t begin, int64_t end, int64_t cols) {
  const int64_t vec_end = cols - cols % 16;
  // Every row has the same offset between y and x, so all take the same direction.
  const bool descending = store_runs_ahead(y, x);
  SquareSums<T> first{_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t j = 0; j < vec_end; j += 16) first.add(x + begin * cols + j);
  float sum_sq = first.total(x + begin * cols, vec_end, cols);
  for (int64_t r = begin; r < end; ++r) {
    const T* x_row = x + r * cols;
    T* y_row = y + r * cols;
    const float rs = rstd[r] = rstd_of_row(x_row, cols, sum_sq, epsilon);
    const bool finite = gamma_finite && std::isfinite(sum_sq);
    sum_sq = r + 1 < end ? scale_row_checked<kStream, true>(x_row, gamma_l, rs, y_row, x_row + cols, cols,
                                                            descending, finite)
                         : scale_row_checked<kStream, false, T>(x_row, gamma_l, rs, y_row, nullptr, cols,
                                                                descending, finite);
  }
  if constexpr (kStream) _mm_sfence();
}

}  // namespace

template <class T, class TG>
void rms_norm(const T* x, const TG* gamma, float epsilon, T* y, float* rstd, int64_t rows, int64_t cols,
              const Parallel& parallel) {
  if (rows == 0) return;
  const RmsNormGamma<T> g(gamma, cols, use_avx2());
  const auto rows_fn = !use_avx2()                    ? norm_rows_baseline<T>
                       : use_streaming(y, rows, cols) ? norm_rows_avx2<true, T>
                                                      : norm_rows_avx2<false, T>;
  const size_t blocks = block_count(static_cast<size_t>(rows), static_cast<size_t>(cols));
  parallel.for_each(blocks, [&](size_t b) {
    rows_fn(x, g.f.data(), g.finite, epsilon, y, rstd, block_begin(b, blocks, rows),
            block_begin(b + 1, blocks, rows), cols);
  });
}

template void rms_norm<float, float>(const float*, const float*, float, float*, float*, int64_t, int64_t,
                                     const Parallel&);
template void rms_norm<half, half>(const half*, const half*, float, half*, float*, int64_t, int64_t,
                                   const Parallel&);
template void rms_norm<half, float>(const half*, const float*, float, half*, float*, int64_t, int64_t,
                                    const Parallel&);
template void rms_norm<bfloat16, bfloat16>(const bfloat16*, const bfloat16*, float, bfloat16*, float*,
                                           int64_t, int64_t, const Parallel&);
template void rms_norm<bfloat16, float>(const bfloat16*, const float*, float, bfloat16*, float*, int64_t,
                                        int64_t, const Parallel&);

}  // namespace oao
