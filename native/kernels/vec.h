// 8-lane float32 vectors for the kernels' hot loops: AVX2 (+FMA, F16C) where the CPU has it, chosen
// once at load time, and plain loops otherwise. Everything here has internal linkage so the AVX2
// code can never be picked by the linker for a caller compiled for the baseline.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/element.h"

#define OAO_AVX2 __attribute__((target("avx2,fma,f16c"), always_inline)) static inline

namespace oao {
namespace {

OAO_AVX2 __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
OAO_AVX2 __m256 load8(const half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
OAO_AVX2 __m256 load8(const bfloat16* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// Round to nearest even, as from_float<bfloat16>; NaN stays NaN.
OAO_AVX2 __m128i to_bf16(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40)), nan);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

// Stores; the streaming forms bypass the cache for outputs too large to stay in it, and need a
// 32-byte (float) or 16-byte (16-bit types) aligned address.
template <bool kStream>
OAO_AVX2 void store8(float* p, __m256 v) {
  if constexpr (kStream) {
    _mm256_stream_ps(p, v);
  } else {
    _mm256_storeu_ps(p, v);
  }
}
template <bool kStream>
OAO_AVX2 void store8_bits(uint16_t* p, __m128i bits) {
  if constexpr (kStream) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), bits);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), bits);
  }
}
template <bool kStream>
OAO_AVX2 void store8(half* p, __m256 v) {
  store8_bits<kStream>(&p->bits, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
template <bool kStream>
OAO_AVX2 void store8(bfloat16* p, __m256 v) {
  store8_bits<kStream>(&p->bits, to_bf16(v));
}

// Lanes added in a fixed order.
OAO_AVX2 float hsum(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float s = 0.f;
  for (float l : lanes) s += l;
  return s;
}

// Elements to store one by one before `p` reaches the alignment streaming stores need.
template <class T>
size_t elements_to_align(const T* p) {
  constexpr size_t kAlign = sizeof(T) == 4 ? 32 : 16;
  const size_t misalign = reinterpret_cast<uintptr_t>(p) % kAlign;
  return misalign == 0 ? 0 : (kAlign - misalign) / sizeof(T);
}

// Outputs larger than this are written with streaming stores: they would not stay in cache, and
// skipping the read-for-ownership saves a third of the memory traffic of these kernels.
inline constexpr size_t kStreamBytes = size_t(8) << 20;

}  // namespace
}  // namespace oao
