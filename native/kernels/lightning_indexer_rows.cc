#include "kernels/lightning_indexer_rows.h"

#include <algorithm>
#include <type_traits>

#include "kernels/element.h"
#include "kernels/row.h"
#include "kernels/vec.h"

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

namespace {

// Heads [begin, end) of relu_backward, one at a time: the plain path, and the AVX2 path's last heads.
void relu_backward_heads(float* s, const float* dy, const float* weight, int64_t n, int64_t h, int64_t begin,
                         int64_t end, float* dw) {
  for (int64_t v = 0; v < n; ++v) {
    float* row = s + v * h;
    for (int64_t j = begin; j < end; ++j) {
      const float x = row[j];
      dw[j] += std::max(x, 0.f) * dy[v];  // std::max(NaN, 0) is NaN, as in the AVX2 path
      row[j] = x > 0.f ? weight[j] * dy[v] : 0.f;
    }
  }
}

// kVectors x 8 heads down all the slots, with as many sums in flight. The same operations, in the
// same order, as relu_backward_heads: both paths give the same bits.
template <int kVectors>
OAO_AVX2 void relu_backward_vectors(float* s, const float* dy, const float* weight, int64_t n, int64_t h,
                                    float* dw) {
  const __m256 zero = _mm256_setzero_ps();
  __m256 acc[kVectors], w[kVectors];
  for (int c = 0; c < kVectors; ++c) {
    acc[c] = _mm256_loadu_ps(dw + 8 * c);
    w[c] = _mm256_loadu_ps(weight + 8 * c);
  }
  for (int64_t v = 0; v < n; ++v) {
    const __m256 dv = _mm256_set1_ps(dy[v]);
    float* row = s + v * h;
    for (int c = 0; c < kVectors; ++c) {
      const __m256 sv = _mm256_loadu_ps(row + 8 * c);
      acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(_mm256_max_ps(zero, sv), dv));  // max(0, NaN) is NaN here
      _mm256_storeu_ps(row + 8 * c,
                       _mm256_and_ps(_mm256_cmp_ps(sv, zero, _CMP_GT_OQ), _mm256_mul_ps(w[c], dv)));
    }
  }
  for (int c = 0; c < kVectors; ++c) _mm256_storeu_ps(dw + 8 * c, acc[c]);
}

OAO_AVX2_TARGET void relu_backward_avx2(float* s, const float* dy, const float* weight, int64_t n, int64_t h,
                                        float* dw) {
  int64_t j = 0;
  for (; j + 32 <= h; j += 32) relu_backward_vectors<4>(s + j, dy, weight + j, n, h, dw + j);
  for (; j + 8 <= h; j += 8) relu_backward_vectors<1>(s + j, dy, weight + j, n, h, dw + j);
  relu_backward_heads(s, dy, weight, n, h, j, h, dw);
}

// acc[begin, n) += add[begin, n): the plain path, and the AVX2 path's last elements.
void add_floats(float* acc, const float* add, int64_t begin, int64_t n) {
  for (int64_t i = begin; i < n; ++i) acc[i] += add[i];
}

OAO_AVX2_TARGET void add_into_avx2(float* acc, const float* add, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(add + i)));
  add_floats(acc, add, i, n);
}

// src[0, n) into dst, one of them float32 (bfloat16 rounded to nearest even 16 at a time, the
// halves of one 32-byte store).
template <class From, class To>
OAO_AVX2_TARGET void convert_avx2(const From* src, int64_t n, To* dst) {
  int64_t i = 0;
  if constexpr (std::is_same_v<To, bfloat16>) {
    for (; i + 16 <= n; i += 16) {
      const __m256i lo = _mm256_srli_epi32(round_to_bf16_high(_mm256_loadu_ps(src + i)), 16);
      const __m256i hi = _mm256_srli_epi32(round_to_bf16_high(_mm256_loadu_ps(src + i + 8)), 16);
      // packus works within 128-bit lanes: the permute puts the four 64-bit quarters back in order.
      const __m256i bits = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), bits);
    }
  } else {
    for (; i + 8 <= n; i += 8) store8<false>(dst + i, load8(src + i));
  }
  for (; i < n; ++i) dst[i] = from_float<To>(to_float(src[i]));
}

template <class From, class To>
void convert(const From* src, int64_t n, To* dst) {
  if constexpr (std::is_same_v<From, To>) {
    std::copy_n(src, n, dst);
  } else if (use_avx2()) {
    convert_avx2(src, n, dst);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = from_float<To>(to_float(src[i]));
  }
}

}  // namespace

void relu_backward(float* s, const float* dy, const float* weight, int64_t n, int64_t h, float* dw) {
  if (use_avx2()) return relu_backward_avx2(s, dy, weight, n, h, dw);
  relu_backward_heads(s, dy, weight, n, h, 0, h, dw);
}

void add_into(float* acc, const float* add, int64_t n) {
  if (use_avx2()) return add_into_avx2(acc, add, n);
  add_floats(acc, add, 0, n);
}

template <class T>
void to_float32(const T* src, int64_t n, float* dst) {
  convert(src, n, dst);
}

template <class T>
void from_float32(const float* src, int64_t n, T* dst) {
  convert(src, n, dst);
}

template void to_float32<float>(const float*, int64_t, float*);
template void to_float32<half>(const half*, int64_t, float*);
template void to_float32<bfloat16>(const bfloat16*, int64_t, float*);
template void from_float32<float>(const float*, int64_t, float*);
template void from_float32<half>(const float*, int64_t, half*);
template void from_float32<bfloat16>(const float*, int64_t, bfloat16*);


}  // namespace oao
