// The float32 exponential of the kernels, the same bits on the plain, AVX2 and AVX-512 paths. Internal
// linkage, as vec.h's helpers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/vec.h"
#include "kernels/vec512.h"

namespace oao {
namespace {

// The Cephes single-precision exponential: x = n ln2 + r (ln2 in two parts), e^r by a degree-7
// polynomial, 2^n in the exponent bits. Each step is one rounded operation or one fused
// multiply-add (std::fma rounds as FMA does), in the same order on both paths, so their bits agree.
// Below kExpLo, n is -127, whose exponent bits make 2^n, and the result, 0.
constexpr float kExpLo = -88.f;
constexpr float kExpHi = 88.f;
constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

inline float exp_plain(float x) {
  if (x != x) return x;
  const float c = std::min(std::max(x, kExpLo), kExpHi);
  const float n = std::floor(std::fma(c, kLog2e, 0.5f));
  float r = std::fma(n, -kLn2Hi, c);
  r = std::fma(n, -kLn2Lo, r);
  const float z = r * r;
  float y = std::fma(kP0, r, kP1);
  y = std::fma(y, r, kP2);
  y = std::fma(y, r, kP3);
  y = std::fma(y, r, kP4);
  y = std::fma(y, r, kP5);
  y = std::fma(y, z, r) + 1.f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

OAO_AVX2 __m256 exp_avx2(__m256 x) {
  const __m256 c = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpLo)), _mm256_set1_ps(kExpHi));
  const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(c, _mm256_set1_ps(kLog2e), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), c);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 y = _mm256_fmadd_ps(_mm256_set1_ps(kP0), r, _mm256_set1_ps(kP1));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kP2));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kP3));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kP4));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kP5));
  y = _mm256_add_ps(_mm256_fmadd_ps(y, z, r), _mm256_set1_ps(1.f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  y = _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // NaN stays NaN
}

OAO_AVX512 __m512 exp_avx512(__m512 x) {
  const __m512 c = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi));
  const __m512 n = _mm512_roundscale_ps(_mm512_fmadd_ps(c, _mm512_set1_ps(kLog2e), _mm512_set1_ps(0.5f)),
                                        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), c);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(kP0), r, _mm512_set1_ps(kP1));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kP2));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kP3));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kP4));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kP5));
  y = _mm512_add_ps(_mm512_fmadd_ps(y, z, r), _mm512_set1_ps(1.f));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  y = _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);  // NaN stays NaN
}

}  // namespace
}  // namespace oao
