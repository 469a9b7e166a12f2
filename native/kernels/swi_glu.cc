#include "kernels/swi_glu.h"

#include "kernels/element.h"
#include "kernels/exp.h"
#include "kernels/swi_glu_halves.h"
#include "kernels/vec.h"

namespace oao {
namespace {

// Each step one rounded operation, in the same order on every path.
inline float swish_times(float a, float b) {
  const float s = 1.f / (1.f + exp_plain(-a));
  return a * s * b;
}

template <class T>
void segment_plain(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = from_float<T>(swish_times(to_float(a[j]), to_float(b[j])));
}

OAO_AVX2 __m256 swish_times8(__m256 a, __m256 b) {
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256 e = exp_avx2(_mm256_xor_ps(a, _mm256_set1_ps(-0.f)));
  const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
  return _mm256_mul_ps(_mm256_mul_ps(a, s), b);
}

// 16 elements at a time in vec.h's lane order, which elementwise work need not undo.
template <class T>
OAO_AVX2_TARGET void segment_avx2(const T* a, const T* b, T* y, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m256 a_lo, a_hi, b_lo, b_hi;
    load16(a + j, a_lo, a_hi);
    load16(b + j, b_lo, b_hi);
    store16<false>(y + j, swish_times8(a_lo, b_lo), swish_times8(a_hi, b_hi));
  }
  segment_plain(a + j, b + j, y + j, n - j);
}

OAO_AVX512 __m512 swish_times16(__m512 a, __m512 b) {
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512 e = exp_avx512(_mm512_xor_ps(a, _mm512_set1_ps(-0.f)));
  const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, e));
  return _mm512_mul_ps(_mm512_mul_ps(a, s), b);
}

template <class T>
OAO_AVX512_TARGET void segment_avx512(const T* a, const T* b, T* y, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) store16_512(y + j, swish_times16(load16_512(a + j), load16_512(b + j)));
  segment_plain(a + j, b + j, y + j, n - j);
}

}  // namespace

template <class T>
void swi_glu(const T* x, T* y, int64_t outer, int64_t half, const Parallel& parallel) {
  const auto run = use_avx512() ? segment_avx512<T> : use_avx2() ? segment_avx2<T> : segment_plain<T>;
  for_glu_segments(outer, half, parallel, [&](int64_t o, int64_t begin, int64_t end) {
    const T* a = x + o * 2 * half + begin;
    run(a, a + half, y + o * half + begin, end - begin);
  });
}

template void swi_glu<float>(const float*, float*, int64_t, int64_t, const Parallel&);
template void swi_glu<half>(const half*, half*, int64_t, int64_t, const Parallel&);
template void swi_glu<bfloat16>(const bfloat16*, bfloat16*, int64_t, int64_t, const Parallel&);

}  // namespace oao
