#include "kernels/sparse_rows.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <mutex>

#include "kernels/row.h"

namespace oao {

std::vector<int64_t> TokenSpans::batch_of_tokens() const {
  std::vector<int64_t> batch(static_cast<size_t>(tokens()));
  for (size_t b = 0; b < query_end.size(); ++b) {
    std::fill(batch.begin() + query_begin(b), batch.begin() + query_end[b], static_cast<int64_t>(b));
  }
  return batch;
}

int64_t counted_slots(const TokenSpans& spans, int64_t b, int64_t s, int64_t k, int sparse_mode) {
  if (sparse_mode == 0) return k;
  const int64_t s1 = spans.query_end[b] - spans.query_begin(b);
  const int64_t s2 = spans.key_end[b] - spans.key_begin(b);
  return std::clamp<int64_t>(s2 - s1 + s + 1, 0, k);
}

template <class I>
BadIndex find_bad_index(const I* indices, const TokenSpans& spans, int64_t k, int sparse_mode) {
  for (size_t b = 0; b < spans.query_end.size(); ++b) {
    const int64_t key_rows = spans.key_end[b] - spans.key_begin(b);
    for (int64_t t = spans.query_begin(b); t < spans.query_end[b]; ++t) {
      const int64_t slots = counted_slots(spans, b, t - spans.query_begin(b), k, sparse_mode);
      for (int64_t slot = 0; slot < slots; ++slot) {
        const int64_t index = static_cast<int64_t>(indices[t * k + slot]);
        if (index != -1 && (index < 0 || index >= key_rows)) return {t, slot, index, key_rows};
      }
    }
  }
  return {};
}

template BadIndex find_bad_index<int32_t>(const int32_t*, const TokenSpans&, int64_t, int);
template BadIndex find_bad_index<int64_t>(const int64_t*, const TokenSpans&, int64_t, int);

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
          float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum; BLAS would also refuse the leading dimension 0
    std::fill(c, c + m * n, 0.f);
    return;
  }
  const auto lda = static_cast<blasint>(trans_a ? m : k), ldb = static_cast<blasint>(trans_b ? k : n);
  scipy_cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                    static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.f, a, lda, b,
                    ldb, 0.f, c, static_cast<blasint>(n));
}

// A plain loop, compiled for x86-64-v3 too: the loader picks the AVX2 copy where the CPU has it.
#if defined(__x86_64__) && defined(__GNUC__)
#define OAO_AVX2_CLONE __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define OAO_AVX2_CLONE
#endif

float relu_backward_row_baseline(float* s, const float* dy, float weight, int64_t n) {
  float lanes[8] = {};
  for (int64_t v = 0; v < n; ++v) {
    lanes[v % 8] += std::max(s[v], 0.f) * dy[v];
    s[v] = s[v] > 0.f ? weight * dy[v] : 0.f;
  }
  float sum = 0.f;
  for (float lane : lanes) sum += lane;
  return sum;
}

__attribute__((target("avx2,fma"))) float relu_backward_row_avx2(float* s, const float* dy, float weight,
                                                                 int64_t n) {
  const __m256 zero = _mm256_setzero_ps(), w = _mm256_set1_ps(weight);
  __m256 acc = zero;
  int64_t v = 0;
  for (; v + 8 <= n; v += 8) {
    const __m256 sv = _mm256_loadu_ps(s + v), dv = _mm256_loadu_ps(dy + v);
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_max_ps(zero, sv), dv));  // max(0, NaN) is NaN here
    _mm256_storeu_ps(s + v, _mm256_and_ps(_mm256_cmp_ps(sv, zero, _CMP_GT_OQ), _mm256_mul_ps(w, dv)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  for (; v < n; ++v) {
    lanes[v % 8] += std::max(s[v], 0.f) * dy[v];
    s[v] = s[v] > 0.f ? weight * dy[v] : 0.f;
  }
  float sum = 0.f;
  for (float lane : lanes) sum += lane;
  return sum;
}

float relu_backward_row(float* s, const float* dy, float weight, int64_t n) {
  return use_avx2() ? relu_backward_row_avx2(s, dy, weight, n) : relu_backward_row_baseline(s, dy, weight, n);
}

__attribute__((target("avx2,fma"))) void add_weighted_relu_avx2(float* acc, const float* scores, float weight,
                                                                int64_t n) {
  const __m256 zero = _mm256_setzero_ps(), w = _mm256_set1_ps(weight);
  int64_t s = 0;
  for (; s + 8 <= n; s += 8) {
    const __m256 relu = _mm256_max_ps(zero, _mm256_loadu_ps(scores + s));  // NaN stays NaN
    _mm256_storeu_ps(acc + s, _mm256_add_ps(_mm256_loadu_ps(acc + s), _mm256_mul_ps(w, relu)));
  }
  for (; s < n; ++s) acc[s] += weight * std::max(scores[s], 0.f);
}

void add_weighted_relu(float* acc, const float* scores, float weight, int64_t n) {
  if (use_avx2()) return add_weighted_relu_avx2(acc, scores, weight, n);
  for (int64_t s = 0; s < n; ++s) acc[s] += weight * std::max(scores[s], 0.f);
}

OAO_AVX2_CLONE void add_into(float* acc, const float* add, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += add[i];
}

void single_threaded_blas() {
  // This OpenBLAS is the scipy-openblas32 wheel's, ours alone in the process (NumPy carries its
  // own), so its global thread count is ours to set; its wheel does not export the per-thread one.
  static std::once_flag once;
  std::call_once(once, [] { scipy_openblas_set_num_threads(1); });
}

}  // namespace oao
