#include "kernels/non_finite_check_and_unscale.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/element.h"
#include "kernels/row.h"
#include "kernels/vec.h"

namespace oao {
namespace {

// Non-finite exactly when the exponent bits are all ones: an integer test the compiler vectorizes,
// where std::isfinite would not be (and -ffast-math could drop it).
__attribute__((always_inline)) inline uint32_t non_finite(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return (u & 0x7F800000u) == 0x7F800000u;
}

// The plain loops (and the AVX2 path's tail): 16-bit types widened in chunks on the stack, which
// element by element the compiler would not vectorize.
template <class T>
__attribute__((always_inline)) inline bool unscale(const T* grads, float inv, T* out, int64_t begin, int64_t end) {
  uint32_t found = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = begin; i < end; ++i) {
      const float g = grads[i];
      found |= non_finite(g);
      out[i] = g * inv;
    }
  } else {
    constexpr int64_t kChunk = 512;
    float g[kChunk];
    for (int64_t c = begin; c < end; c += kChunk) {
      const int64_t n = std::min(kChunk, end - c);
      for (int64_t i = 0; i < n; ++i) g[i] = to_float(grads[c + i]);
      for (int64_t i = 0; i < n; ++i) found |= non_finite(g[i]);
      for (int64_t i = 0; i < n; ++i) g[i] *= inv;
      for (int64_t i = 0; i < n; ++i) out[c + i] = from_float<T>(g[i]);
    }
  }
  return found != 0;
}

template <class T>
bool unscale_baseline(const T* grads, float inv, T* out, int64_t begin, int64_t end) {
  return unscale(grads, inv, out, begin, end);
}

// All ones in the lanes of v holding an inf or a NaN.
OAO_AVX2 __m256i non_finite8(__m256 v) {
  const __m256i exponent = _mm256_set1_epi32(0x7F800000);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(v), exponent), exponent);
}

// 16 elements at a time in vec.h's lane order, which an elementwise product need not undo.
template <class T>
OAO_AVX2_TARGET bool unscale_avx2(const T* grads, float inv, T* out, int64_t begin, int64_t end) {
  const __m256 scale = _mm256_set1_ps(inv);
  __m256i found = _mm256_setzero_si256();
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m256 lo, hi;
    load16(grads + i, lo, hi);
    found = _mm256_or_si256(found, _mm256_or_si256(non_finite8(lo), non_finite8(hi)));
    store16<false>(out + i, _mm256_mul_ps(lo, scale), _mm256_mul_ps(hi, scale));
  }
  const bool tail = unscale(grads, inv, out, i, end);
  return tail || !_mm256_testz_si256(found, found);
}

}  // namespace

template <class T>
bool non_finite_check_and_unscale(const T* grads, float inv_scale, T* out, int64_t count, const Parallel& parallel) {
  // Elements are independent and the flags are ORed: any split gives the same result.
  const size_t blocks = block_count(static_cast<size_t>(count), 1);
  const auto block_fn = use_avx2() ? unscale_avx2<T> : unscale_baseline<T>;
  bool found[64] = {};  // block_count makes at most 64 blocks
  parallel.for_each(blocks, [&](size_t b) {
    found[b] = block_fn(grads, inv_scale, out, block_begin(b, blocks, count), block_begin(b + 1, blocks, count));
  });
  return std::any_of(found, found + blocks, [](bool f) { return f; });
}

template bool non_finite_check_and_unscale<float>(const float*, float, float*, int64_t, const Parallel&);
template bool non_finite_check_and_unscale<half>(const half*, float, half*, int64_t, const Parallel&);
template bool non_finite_check_and_unscale<bfloat16>(const bfloat16*, float, bfloat16*, int64_t, const Parallel&);

}  // namespace oao
