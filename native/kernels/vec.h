// 8-lane float32 vectors for the kernels' hot loops: AVX2 (+FMA, F16C) where the CPU has it, chosen
// once at load time, and plain loops otherwise. Everything here has internal linkage so the AVX2
// code can never be picked by the linker for a caller compiled for the baseline.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/element.h"
#include "kernels/row.h"

// A helper of OAO_AVX2_TARGET code, inlined into it.
#define OAO_AVX2 OAO_AVX2_TARGET __attribute__((always_inline)) inline

namespace oao {
namespace {

// The hot loops take 16 elements at a time as two 8-lane vectors, `lo` and `hi`. For bfloat16 one
// 32-byte load splits into the even elements (lo) and the odd ones (hi) with one shift and one mask,
// half the work of widening each 8; other types keep memory order. Column-indexed float arrays the
// loops read or accumulate alongside (gamma, dgamma) are kept in the same lane order inside each
// 16-column chunk: see to_lane_order and from_lane_order.
template <class T>
inline constexpr bool kInterleaved = std::is_same_v<T, bfloat16>;

OAO_AVX2 void load16(const float* p, __m256& lo, __m256& hi) {
  lo = _mm256_loadu_ps(p);
  hi = _mm256_loadu_ps(p + 8);
}
OAO_AVX2 void load16(const half* p, __m256& lo, __m256& hi) {
  lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
}
OAO_AVX2 void load16(const bfloat16* p, __m256& lo, __m256& hi) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  lo = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  hi = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int32_t(0xFFFF0000u))));
}

// The bfloat16 of each lane, rounded to nearest even as from_float<bfloat16>, in the lane's upper 16
// bits (the lower ones are garbage). A NaN becomes a quiet NaN instead of rounding into infinity.
// kInputNaN false: the values come from finite inputs, so the only NaN among them is the CPU's
// default one (0 * inf, inf - inf), whose rounding stays that NaN; the check is then left out (it
// is a fifth of a bfloat16 loop's instructions).
template <bool kInputNaN = true>
OAO_AVX2 __m256i round_to_bf16_high(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb);
  if constexpr (!kInputNaN) return rounded;
  const __m256i quiet_nan = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
  return _mm256_blendv_epi8(rounded, quiet_nan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
}

// 8 elements in memory order as one vector, loaded or stored. kStream: a streaming store, for
// outputs too large to stay in cache (see use_streaming).
OAO_AVX2 __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
OAO_AVX2 __m256 load8(const half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
OAO_AVX2 __m256 load8(const bfloat16* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
template <bool kStream>
OAO_AVX2 void store_bits(void* p, __m128i bits) {
  if constexpr (kStream) {
    _mm_stream_si128(static_cast<__m128i*>(p), bits);
  } else {
    _mm_storeu_si128(static_cast<__m128i*>(p), bits);
  }
}
template <bool kStream>
OAO_AVX2 void store8(float* p, __m256 v) {
  if constexpr (kStream) {
    _mm256_stream_ps(p, v);
  } else {
    _mm256_storeu_ps(p, v);
  }
}
template <bool kStream>
OAO_AVX2 void store8(half* p, __m256 v) {
  store_bits<kStream>(p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
template <bool kStream>
OAO_AVX2 void store8(bfloat16* p, __m256 v) {
  const __m256i r = _mm256_srli_epi32(round_to_bf16_high(v), 16);
  store_bits<kStream>(p, _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
}

// Stores 16 elements given in lane order. The streaming forms bypass the cache for outputs too large
// to stay in it, and need `p` aligned to kStreamAlign<T>. kInputNaN: see round_to_bf16_high.
template <class T>
inline constexpr size_t kStreamAlign = sizeof(T) == 2 && !kInterleaved<T> ? 16 : 32;

template <bool kStream, bool kInputNaN = true, class T>
OAO_AVX2 void store16(T* p, __m256 lo, __m256 hi) {
  if constexpr (kInterleaved<T>) {
    // Even elements come from the lower 16 bits of each 32-bit lane, odd ones from the upper.
    const __m256i bits = _mm256_blend_epi16(_mm256_srli_epi32(round_to_bf16_high<kInputNaN>(lo), 16),
                                            round_to_bf16_high<kInputNaN>(hi), 0xAA);
    auto* q = reinterpret_cast<__m256i*>(p);
    if constexpr (kStream) {
      _mm256_stream_si256(q, bits);
    } else {
      _mm256_storeu_si256(q, bits);
    }
  } else {
    store8<kStream>(p, lo);
    store8<kStream>(p + 8, hi);
  }
}

// Lanes added in a fixed order.
OAO_AVX2 float hsum(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float s = 0.f;
  for (float l : lanes) s += l;
  return s;
}

// Reorders v[0, n - n % 16) between memory order and the lane order of T (see load16); the columns
// past the last full chunk, which the loops take one by one, stay in memory order.
template <class T>
void to_lane_order(float* v, int64_t n) {
  if constexpr (kInterleaved<T>) {
    for (int64_t c = 0; c + 16 <= n; c += 16) {
      float chunk[16];
      for (int i = 0; i < 8; ++i) chunk[i] = v[c + 2 * i], chunk[8 + i] = v[c + 2 * i + 1];
      for (int i = 0; i < 16; ++i) v[c + i] = chunk[i];
    }
  }
}
template <class T>
void from_lane_order(float* v, int64_t n) {
  if constexpr (kInterleaved<T>) {
    for (int64_t c = 0; c + 16 <= n; c += 16) {
      float chunk[16];
      for (int i = 0; i < 16; ++i) chunk[i] = v[c + i];
      for (int i = 0; i < 8; ++i) v[c + 2 * i] = chunk[i], v[c + 2 * i + 1] = chunk[8 + i];
    }
  }
}

inline bool all_finite(const float* v, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    if (!std::isfinite(v[j])) return false;
  }
  return true;
}

// Whether an output of `rows` x `cols` at `out` is written with streaming stores: only when it is too
// large to stay in cache anyway (streaming then skips the read-for-ownership, a third of the memory
// traffic of these kernels), and every row starts aligned for them.
template <class T>
bool use_streaming(const T* out, int64_t rows, int64_t cols) {
  const size_t row_bytes = static_cast<size_t>(cols) * sizeof(T);
  return static_cast<size_t>(rows) * row_bytes >= kStreamingBytes &&
         reinterpret_cast<uintptr_t>(out) % kStreamAlign<T> == 0 && row_bytes % kStreamAlign<T> == 0;
}

// Whether a loop that stores to `out` while loading from `in` at the same columns should go down the
// columns rather than up. A load waits for an earlier, still pending store whose address matches it in
// the low 12 bits (4K aliasing), and streaming stores stay pending long. Going up with `out` less than
// 128 bytes ahead of `in` modulo 4 KiB, each store matches the loads of the next few iterations
// (measured up to 1.8x slower); that is the usual case for NumPy inputs (16 bytes into a page) with
// ONNX Runtime outputs (64). Going down, those loads come before the store.
inline bool store_runs_ahead(const void* out, const void* in) {
  const uintptr_t ahead = (reinterpret_cast<uintptr_t>(out) - reinterpret_cast<uintptr_t>(in)) % 4096;
  return ahead != 0 && ahead < 128;
}

}  // namespace
}  // namespace oao
