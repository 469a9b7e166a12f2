// 16-lane float32 vectors for the kernels' AVX-512 paths (use_avx512), in memory order, beside
// vec.h's AVX2 ones. Conversions and rounding are vec.h's, lane for lane, so an elementwise loop
// gives the AVX2 path's bits. Internal linkage, as vec.h.
#pragma once

#include <immintrin.h>

#include "kernels/element.h"
#include "kernels/row.h"
#include "kernels/vec.h"

// A helper of OAO_AVX512_TARGET code, inlined into it.
#define OAO_AVX512 OAO_AVX512_TARGET __attribute__((always_inline)) inline

namespace oao {
namespace {

OAO_AVX512 __m512 load16_512(const float* p) { return _mm512_loadu_ps(p); }
OAO_AVX512 __m512 load16_512(const half* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
OAO_AVX512 __m512 load16_512(const bfloat16* p) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

// round_to_bf16_high of vec.h on 16 lanes, shifted down: each lane's bfloat16 in its low 16 bits.
// kInputNaN false leaves the NaN check out, as there.
template <bool kInputNaN = true>
OAO_AVX512 __m512i round_to_bf16_512(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i bits = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb);
  if constexpr (kInputNaN) {
    const __m512i quiet_nan = _mm512_or_si512(u, _mm512_set1_epi32(0x400000));
    bits = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), bits, quiet_nan);
  }
  return _mm512_srli_epi32(bits, 16);
}

// 16 elements stored in memory order. kStream: streaming stores, with p aligned as vec.h's
// kStreamAlign<T> asks (so in 32- or 16-byte pieces).
template <bool kStream = false, bool kInputNaN = true>
OAO_AVX512 void store16_512(float* p, __m512 v) {
  if constexpr (kStream) {
    _mm256_stream_ps(p, _mm512_castps512_ps256(v));
    _mm256_stream_ps(p + 8, _mm512_extractf32x8_ps(v, 1));
  } else {
    _mm512_storeu_ps(p, v);
  }
}
template <bool kStream = false, bool kInputNaN = true>
OAO_AVX512 void store16_512(half* p, __m512 v) {
  const __m256i bits = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
  if constexpr (kStream) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(bits));
    _mm_stream_si128(reinterpret_cast<__m128i*>(p + 8), _mm256_extracti128_si256(bits, 1));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bits);
  }
}
template <bool kStream = false, bool kInputNaN = true>
OAO_AVX512 void store16_512(bfloat16* p, __m512 v) {
  const __m256i bits = _mm512_cvtepi32_epi16(round_to_bf16_512<kInputNaN>(v));
  if constexpr (kStream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), bits);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bits);
  }
}

// The sum of v's 16 lanes in the order vec.h's hsum(lo + hi) adds two 8-lane vectors loaded by
// load16 for T: lane l of lo with lane l of hi, then lanes 0 to 7. For bfloat16, whose lo and hi
// hold the even and the odd elements of 16, that is element 2l with 2l + 1.
template <class T>
OAO_AVX512 float hsum_as_avx2(__m512 v) {
  if constexpr (kInterleaved<T>) {
    v = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15), v);
  }
  return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

}  // namespace
}  // namespace oao
