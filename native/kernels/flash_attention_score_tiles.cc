#include "kernels/flash_attention_score_tiles.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "kernels/element.h"
#include "kernels/exp.h"
#include "kernels/row.h"
#include "kernels/vec.h"
#include "kernels/vec512.h"

namespace oao {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// pre_tokens and next_tokens take any int64; past +-2^62 they already reach every row of any
// tensor, and the bounds below cannot overflow then.
int64_t saturated(int64_t tokens) {
  constexpr int64_t kFar = int64_t(1) << 62;
  return std::clamp(tokens, -kFar, kFar);
}

// The sum's order on both paths: 8 running sums over j % 8 of the full chunks, added lane 0 to 7,
// then the last n % 8 values one by one.
OAO_AVX2_TARGET float exp_row_avx2(float* row, int64_t n, float max) {
  const __m256 m = _mm256_set1_ps(max);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(row + j), m));
    _mm256_storeu_ps(row + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum(acc);
  for (; j < n; ++j) sum += row[j] = exp_plain(row[j] - max);
  return sum;
}

// exp_row_avx2's sums in its order: each 16 values are its two chunks of 8, added one after the
// other.
OAO_AVX512_TARGET float exp_row_avx512(float* row, int64_t n, float max) {
  const __m512 m = _mm512_set1_ps(max);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 16) {
    const __mmask16 full = j + 16 <= n ? 0xFFFF : 0x00FF;
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(full, row + j), m));
    _mm512_mask_storeu_ps(row + j, full, e);
    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
    if (full == 0xFFFF) acc = _mm256_add_ps(acc, _mm512_extractf32x8_ps(e, 1));
  }
  j = n - n % 8;
  float sum = hsum(acc);
  for (; j < n; ++j) sum += row[j] = exp_plain(row[j] - max);
  return sum;
}

float exp_row_plain(float* row, int64_t n, float max) {
  float acc[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += row[j + l] = exp_plain(row[j + l] - max);
  }
  float sum = 0.f;
  for (const float a : acc) sum += a;
  for (; j < n; ++j) sum += row[j] = exp_plain(row[j] - max);
  return sum;
}

OAO_AVX2_TARGET void scale_row_avx2(float* row, int64_t n, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), f));
  for (; j < n; ++j) row[j] *= factor;
}

// max over row[0, n) as _mm256_max_ps takes it (a NaN score is passed over), -inf when n is 0, and
// +0 for a zero of either sign: the paths compare in different orders.
OAO_AVX2_TARGET float max_avx2(const float* row, int64_t n) {
  __m256 m = _mm256_set1_ps(-kInf);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) m = _mm256_max_ps(_mm256_loadu_ps(row + j), m);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float out = -kInf;
  for (const float l : lanes) out = l > out ? l : out;
  for (; j < n; ++j) out = row[j] > out ? row[j] : out;
  return out + 0.f;
}

OAO_AVX512_TARGET void scale_row_avx512(float* row, int64_t n, float factor) {
  const __m512 f = _mm512_set1_ps(factor);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 left = j + 16 <= n ? 0xFFFF : static_cast<__mmask16>((1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(row + j, left, _mm512_mul_ps(_mm512_maskz_loadu_ps(left, row + j), f));
  }
}

float max_plain(const float* row, int64_t n) {
  float out = -kInf;
  for (int64_t j = 0; j < n; ++j) out = row[j] > out ? row[j] : out;
  return out + 0.f;
}

}  // namespace

FaRange fa_row_keys(const FlashAttentionGeometry& g, int64_t b, int64_t q) {
  const int64_t s2 = g.key_rows(b);
  if (g.sparse_mode == 2) return {0, std::clamp<int64_t>(q + 1, 0, s2)};
  if (g.sparse_mode == 3) return {0, std::clamp<int64_t>(q + s2 - g.query_rows(b) + 1, 0, s2)};
  if (!g.masked) return {0, s2};
  return {std::clamp<int64_t>(q - saturated(g.pre_tokens), 0, s2),
          std::clamp<int64_t>(q + saturated(g.next_tokens) + 1, 0, s2)};
}

FaRange fa_block_keys(const FlashAttentionGeometry& g, int64_t b, FaRange rows) {
  if (rows.empty()) return {};
  return {fa_row_keys(g, b, rows.begin).begin, fa_row_keys(g, b, rows.end - 1).end};
}

FaRange fa_block_queries(const FlashAttentionGeometry& g, int64_t b, FaRange keys) {
  const int64_t s1 = g.query_rows(b);
  if (keys.empty()) return {};
  // Row q reads some key of [k0, k1) when its range starts before k1 and ends after k0.
  int64_t first = 0, end = s1;
  if (g.sparse_mode == 2) {
    first = keys.begin;
  } else if (g.sparse_mode == 3) {
    first = keys.begin - (g.key_rows(b) - s1);
  } else if (g.masked) {
    first = keys.begin - saturated(g.next_tokens);
    end = keys.end + saturated(g.pre_tokens);
  }
  return {std::clamp<int64_t>(first, 0, s1), std::clamp<int64_t>(end, 0, s1)};
}

float fa_mask_row(const FlashAttentionGeometry& g, const uint8_t* mask, int64_t b, int64_t h, int64_t q,
                  int64_t k0, int64_t n, float* row) {
  const FaRange keys = fa_row_keys(g, b, q);
  const int64_t lo = std::clamp<int64_t>(keys.begin - k0, 0, n),
                hi = std::clamp<int64_t>(keys.end - k0, lo, n);
  std::fill(row, row + lo, -kInf);
  std::fill(row + hi, row + n, -kInf);
  if (mask != nullptr) {
    const uint8_t* m = mask + g.mask_at(b, h, q) + k0;
    for (int64_t j = lo; j < hi; ++j) row[j] = m[j] ? -kInf : row[j];
  }
  return use_avx2() ? max_avx2(row + lo, hi - lo) : max_plain(row + lo, hi - lo);
}

float fa_exp(float x) { return exp_plain(x); }

float fa_exp_row(float* row, int64_t n, float max) {
  if (use_avx512()) return exp_row_avx512(row, n, max);
  return use_avx2() ? exp_row_avx2(row, n, max) : exp_row_plain(row, n, max);
}

void fa_scale_row(float* row, int64_t n, float factor) {
  if (use_avx512()) return scale_row_avx512(row, n, factor);
  if (use_avx2()) return scale_row_avx2(row, n, factor);
  for (int64_t j = 0; j < n; ++j) row[j] *= factor;
}

std::vector<FaQueryTask> fa_query_tasks(const FlashAttentionGeometry& g) {
  std::vector<FaQueryTask> tasks;
  const int64_t group = g.group();
  for (int64_t b = 0; b < g.batches(); ++b) {
    const int64_t s1 = g.query_rows(b);
    if (s1 == 0) continue;
    // Short batches stack more heads, up to kFaTaskRows rows.
    const int64_t rows = std::min(s1, kFaQueryBlock);
    const int64_t heads = std::clamp<int64_t>(kFaTaskRows / rows, 1, group);
    for (int64_t kv = 0; kv < g.n2; ++kv) {
      for (int64_t h = 0; h < group; h += heads) {
        for (int64_t q = 0; q < s1; q += rows) {
          tasks.push_back(
              {b, kv, kv * group + h, kv * group + std::min(group, h + heads), {q, std::min(s1, q + rows)}});
        }
      }
    }
  }
  return tasks;
}

template <class T>
void fa_load_rows(const T* src, int64_t stride, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r) to_float32(src + r * stride, cols, dst + r * cols);
}

template <class T>
FaRows fa_rows(const T* src, int64_t stride, int64_t rows, int64_t cols, std::vector<float>& buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return {src, stride};
  } else {
    buffer.resize(static_cast<size_t>(rows * cols));
    fa_load_rows(src, stride, rows, cols, buffer.data());
    return {buffer.data(), cols};
  }
}

template <class T>
void fa_round_to(float* x, int64_t count) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    constexpr int64_t kChunk = 256;
    T buffer[kChunk];
    for (int64_t i = 0; i < count; i += kChunk) {
      const int64_t c = std::min(kChunk, count - i);
      from_float32(x + i, c, buffer);
      to_float32(buffer, c, x + i);
    }
  }
}

template void fa_round_to<float>(float*, int64_t);
template void fa_round_to<half>(float*, int64_t);
template void fa_round_to<bfloat16>(float*, int64_t);
template void fa_load_rows<float>(const float*, int64_t, int64_t, int64_t, float*);
template void fa_load_rows<half>(const half*, int64_t, int64_t, int64_t, float*);
template void fa_load_rows<bfloat16>(const bfloat16*, int64_t, int64_t, int64_t, float*);
template FaRows fa_rows<float>(const float*, int64_t, int64_t, int64_t, std::vector<float>&);
template FaRows fa_rows<half>(const half*, int64_t, int64_t, int64_t, std::vector<float>&);
template FaRows fa_rows<bfloat16>(const bfloat16*, int64_t, int64_t, int64_t, std::vector<float>&);

}  // namespace oao
