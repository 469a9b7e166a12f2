#include "kernels/swi_glu_grad.h"

#include "kernels/element.h"
#include "kernels/exp.h"
#include "kernels/swi_glu_halves.h"
#include "kernels/vec.h"

namespace oao {
namespace {

// Each step one rounded operation, in the same order on every path.
inline void glu_grad(float g, float a, float b, float& da, float& db) {
  const float s = 1.f / (1.f + exp_plain(-a));
  da = g * b * (s * (1.f + a * (1.f - s)));
  db = g * (a * s);
}

template <class T>
void segment_plain(const T* dy, const T* a, const T* b, T* da, T* db, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    float ga, gb;
    glu_grad(to_float(dy[j]), to_float(a[j]), to_float(b[j]), ga, gb);
    da[j] = from_float<T>(ga);
    db[j] = from_float<T>(gb);
  }
}

OAO_AVX2 void glu_grad8(__m256 g, __m256 a, __m256 b, __m256& da, __m256& db) {
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256 e = exp_avx2(_mm256_xor_ps(a, _mm256_set1_ps(-0.f)));
  const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
  const __m256 slope = _mm256_mul_ps(s, _mm256_add_ps(one, _mm256_mul_ps(a, _mm256_sub_ps(one, s))));
  da = _mm256_mul_ps(_mm256_mul_ps(g, b), slope);
  db = _mm256_mul_ps(g, _mm256_mul_ps(a, s));
}

// 16 elements at a time in vec.h's lane order, which elementwise work need not undo.
template <class T>
OAO_AVX2_TARGET void segment_avx2(const T* dy, const T* a, const T* b, T* da, T* db, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m256 g_lo, g_hi, a_lo, a_hi, b_lo, b_hi, da_lo, da_hi, db_lo, db_hi;
    load16(dy + j, g_lo, g_hi);
    load16(a + j, a_lo, a_hi);
    load16(b + j, b_lo, b_hi);
    glu_grad8(g_lo, a_lo, b_lo, da_lo, db_lo);
    glu_grad8(g_hi, a_hi, b_hi, da_hi, db_hi);
    store16<false>(da + j, da_lo, da_hi);
    store16<false>(db + j, db_lo, db_hi);
  }
  segment_plain(dy + j, a + j, b + j, da + j, db + j, n - j);
}

OAO_AVX512 void glu_grad16(__m512 g, __m512 a, __m512 b, __m512& da, __m512& db) {
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512 e = exp_avx512(_mm512_xor_ps(a, _mm512_set1_ps(-0.f)));
  const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, e));
  const __m512 slope = _mm512_mul_ps(s, _mm512_add_ps(one, _mm512_mul_ps(a, _mm512_sub_ps(one, s))));
  da = _mm512_mul_ps(_mm512_mul_ps(g, b), slope);
  db = _mm512_mul_ps(g, _mm512_mul_ps(a, s));
}

template <class T>
OAO_AVX512_TARGET void segment_avx512(const T* dy, const T* a, const T* b, T* da, T* db, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512 ga, gb;
    glu_grad16(load16_512(dy + j), load16_512(a + j), load16_512(b + j), ga, gb);
    store16_512(da + j, ga);
    store16_512(db + j, gb);
  }
  segment_plain(dy + j, a + j, b + j, da + j, db + j, n - j);
}

}  // namespace

template <class T>
void swi_glu_grad(const T* dy, const T* x, T* dx, int64_t outer, int64_t half, const Parallel& parallel) {
  const auto run = use_avx512() ? segment_avx512<T> : use_avx2() ? segment_avx2<T> : segment_plain<T>;
  for_glu_segments(outer, half, parallel, [&](int64_t o, int64_t begin, int64_t end) {
    const int64_t at = o * 2 * half + begin;
    run(dy + o * half + begin, x + at, x + at + half, dx + at, dx + at + half, end - begin);
  });
}

template void swi_glu_grad<float>(const float*, const float*, float*, int64_t, int64_t, const Parallel&);
template void swi_glu_grad<half>(const half*, const half*, half*, int64_t, int64_t, const Parallel&);
template void swi_glu_grad<bfloat16>(const bfloat16*, const bfloat16*, bfloat16*, int64_t, int64_t,
                                     const Parallel&);

}  // namespace oao
