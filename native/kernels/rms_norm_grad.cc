#include "kernels/rms_norm_grad.h"

#include <algorithm>
#include <vector>

#include "kernels/element.h"
#include "kernels/row.h"
#include "kernels/vec.h"

namespace oao {
namespace {

// Rows [begin, end) of one block: dx, and dgamma_part += dy * xhat row by row, in row order.
// Per row, pass 1 sums dy*gamma*xhat (and feeds dgamma); pass 2, over the same row while it is
// still in L1/L2, writes dx. gamma_f is gamma in float32.
template <class T>
void grad_rows_baseline(const T* dy, const T* x, const float* rstd, const float* gamma_f, T* dx,
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

// dx for one row whose dy and x are in cache. For 16-bit types, whose conversions make this pass
// compute-bound, it also prefetches the 2*cols elements at `next` (the next rows' inputs) so that
// memory keeps streaming meanwhile; for float32 that measured slower than the hardware prefetcher.
template <bool kStream, class T>
__attribute__((target("avx2,fma,f16c"))) void dx_row_avx2(const T* dy_row, const T* x_row,
                                                          const float* gamma_f, T* dx_row, float rs,
                                                          float dot, int64_t cols, const T* next) {
  const float scaled_mean = dot / static_cast<float>(cols) * rs;
  const __m256 vrs = _mm256_set1_ps(rs);
  const __m256 vmean = _mm256_set1_ps(scaled_mean);
  auto dx_at = [&](int64_t k) {
    return from_float<T>(rs * (to_float(dy_row[k]) * gamma_f[k] - to_float(x_row[k]) * scaled_mean));
  };
  int64_t j = 0;
  if constexpr (kStream) {
    for (const int64_t head = std::min<int64_t>(cols, elements_to_align(dx_row)); j < head; ++j)
      dx_row[j] = dx_at(j);
  }
  for (; j + 8 <= cols; j += 8) {
    if (sizeof(T) == 2 && next != nullptr)
      _mm_prefetch(reinterpret_cast<const char*>(next + 2 * j), _MM_HINT_T0);
    const __m256 g = _mm256_mul_ps(load8(dy_row + j), load8(gamma_f + j));
    store8<kStream>(dx_row + j, _mm256_mul_ps(vrs, _mm256_sub_ps(g, _mm256_mul_ps(load8(x_row + j), vmean))));
  }
  for (; j < cols; ++j) dx_row[j] = dx_at(j);
}

template <bool kStream, class T>
__attribute__((target("avx2,fma,f16c"))) void grad_rows_avx2(const T* dy, const T* x, const float* rstd,
                                                             const float* gamma_f, T* dx, float* dgamma_part,
                                                             int64_t begin, int64_t end, int64_t cols) {
  const int64_t vec_end = cols - cols % 8;
  int64_t r = begin;
  // Rows go in pairs: the dgamma partials are then loaded and stored once per two rows.
  for (; r + 2 <= end; r += 2) {
    const T* dy0 = dy + r * cols;
    const T* x0 = x + r * cols;
    const T* dy1 = dy0 + cols;
    const T* x1 = x0 + cols;
    const float rs0 = rstd[r], rs1 = rstd[r + 1];
    const __m256 vrs0 = _mm256_set1_ps(rs0), vrs1 = _mm256_set1_ps(rs1);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j < vec_end; j += 8) {
      const __m256 g = load8(gamma_f + j);
      const __m256 p0 = _mm256_mul_ps(load8(dy0 + j), _mm256_mul_ps(load8(x0 + j), vrs0));
      const __m256 p1 = _mm256_mul_ps(load8(dy1 + j), _mm256_mul_ps(load8(x1 + j), vrs1));
      acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(p0, g));
      acc1 = _mm256_add_ps(acc1, _mm256_mul_ps(p1, g));
      _mm256_storeu_ps(dgamma_part + j, _mm256_add_ps(load8(dgamma_part + j), _mm256_add_ps(p0, p1)));
    }
    float dot0 = hsum(acc0), dot1 = hsum(acc1);
    for (; j < cols; ++j) {
      const float p0 = to_float(dy0[j]) * (to_float(x0[j]) * rs0);
      const float p1 = to_float(dy1[j]) * (to_float(x1[j]) * rs1);
      dot0 += p0 * gamma_f[j];
      dot1 += p1 * gamma_f[j];
      dgamma_part[j] += p0 + p1;
    }
    const bool more = r + 4 <= end;
    dx_row_avx2<kStream>(dy0, x0, gamma_f, dx + r * cols, rs0, dot0, cols, more ? dy1 + cols : nullptr);
    dx_row_avx2<kStream>(dy1, x1, gamma_f, dx + (r + 1) * cols, rs1, dot1, cols, more ? x1 + cols : nullptr);
  }
  for (; r < end; ++r) {
    const T* dy0 = dy + r * cols;
    const T* x0 = x + r * cols;
    const float rs0 = rstd[r];
    const __m256 vrs0 = _mm256_set1_ps(rs0);
    __m256 acc0 = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j < vec_end; j += 8) {
      const __m256 p0 = _mm256_mul_ps(load8(dy0 + j), _mm256_mul_ps(load8(x0 + j), vrs0));
      acc0 = _mm256_add_ps(acc0, _mm256_mul_ps(p0, load8(gamma_f + j)));
      _mm256_storeu_ps(dgamma_part + j, _mm256_add_ps(load8(dgamma_part + j), p0));
    }
    float dot0 = hsum(acc0);
    for (; j < cols; ++j) {
      const float p0 = to_float(dy0[j]) * (to_float(x0[j]) * rs0);
      dot0 += p0 * gamma_f[j];
      dgamma_part[j] += p0;
    }
    dx_row_avx2<kStream>(dy0, x0, gamma_f, dx + r * cols, rs0, dot0, cols, static_cast<const T*>(nullptr));
  }
  if constexpr (kStream) _mm_sfence();
}

}  // namespace

template <class T, class TG>
void rms_norm_grad(const T* dy, const T* x, const float* rstd, const TG* gamma, T* dx, float* dgamma,
                   int64_t rows, int64_t cols, const Parallel& parallel) {
  if (cols == 0) return;
  std::fill(dgamma, dgamma + cols, 0.f);
  if (rows == 0) return;

  std::vector<float> gamma_f(cols);
  for (int64_t j = 0; j < cols; ++j) gamma_f[j] = to_float(gamma[j]);

  auto rows_fn = grad_rows_baseline<T>;
  if (use_avx2()) {
    const bool stream = static_cast<size_t>(rows * cols) * sizeof(T) >= kStreamBytes;
    rows_fn = stream ? grad_rows_avx2<true, T> : grad_rows_avx2<false, T>;
  }

  // Each block adds its rows into its own partial dgamma; the partials are then summed in block
  // order. Blocks depend only on the shape, so the sums are the same for any thread count.
  const size_t blocks = block_count(static_cast<size_t>(rows));
  std::vector<float> partial(blocks * static_cast<size_t>(cols), 0.f);
  parallel.for_each(blocks, [&](size_t b) {
    rows_fn(dy, x, rstd, gamma_f.data(), dx, partial.data() + b * cols, block_begin(b, blocks, rows),
            block_begin(b + 1, blocks, rows), cols);
  });

  const size_t strips = block_count(static_cast<size_t>(cols + 255) / 256);
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
