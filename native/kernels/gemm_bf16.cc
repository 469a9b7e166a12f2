#include "kernels/gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/lightning_indexer_rows.h"
#include "kernels/row.h"

namespace oao {
namespace {

// The register tile: 8 rows of C by 32 columns (two 16-lane vectors), 16 accumulators, enough
// independent dot products to cover their latency.
constexpr int64_t kMr = 8, kNr = 32;
// Pairs of k per packed slice of B: a 32-column panel of it is 16 KiB, read from L1 by every row
// panel, and a slice of 512 columns stays within a core's L2.
constexpr int64_t kKc = 128;

// One pair of k in a 32-bit word, the layout of the dot product's operands: element 2p in the low
// half, 2p + 1 in the high one (0 past k).
inline uint32_t pair_word(uint16_t lo, uint16_t hi) { return uint32_t(lo) | uint32_t(hi) << 16; }

// out[j] = the pair (r0[j], r1[j]) for j in [0, count), r1 null: zeros for the high halves.
OAO_AVX512_BF16_TARGET void interleave(const bfloat16* r0, const bfloat16* r1, int64_t count, uint32_t* out) {
  for (int64_t j = 0; j < count; j += 16) {
    const int64_t left = std::min<int64_t>(16, count - j);
    const __mmask16 m = static_cast<__mmask16>((1u << left) - 1);
    const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0 + j));
    const __m512i hi =
        r1 == nullptr ? _mm512_setzero_si512()
                      : _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r1 + j)), 16);
    _mm512_mask_storeu_epi32(out + j, m, _mm512_or_si512(lo, hi));
  }
}

// The 16 x 16 words of v transposed in place: v[q] lane r <- v[r] lane q.
OAO_AVX512_BF16_TARGET __attribute__((always_inline)) inline void transpose16(__m512i (&v)[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    v[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    v[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    v[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    v[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(v[i], v[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(v[i], v[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(v[i + 8], v[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(v[i + 8], v[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    v[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    v[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
  }
}

// out[p * kNr + j] = word p of row j (pairs p0 + p of rows [0, rows) of x at ld), for p < pc: 16
// rows by 16 pairs at a time, transposed in registers (rows past `rows` and pairs past pc are
// never loaded).
OAO_AVX512_BF16_TARGET void transpose_words(const bfloat16* x, int64_t ld, int64_t rows, int64_t p0, int64_t pc,
                                            uint32_t* out) {
  for (int64_t j = 0; j < rows; j += 16) {
    for (int64_t p = 0; p < pc; p += 16) {
      const int64_t count = std::min<int64_t>(16, pc - p);
      const __mmask16 m = static_cast<__mmask16>((1u << count) - 1);
      __m512i v[16];
      for (int64_t r = 0; r < 16; ++r) {
        v[r] = j + r < rows ? _mm512_maskz_loadu_epi32(m, x + (j + r) * ld + 2 * (p0 + p)) : _mm512_setzero_si512();
      }
      transpose16(v);
      const __mmask16 live = static_cast<__mmask16>((1u << std::min<int64_t>(16, rows - j)) - 1);
      for (int64_t q = 0; q < count; ++q) _mm512_mask_storeu_epi32(out + (p + q) * kNr + j, live, v[q]);
    }
  }
}

// Pairs [p0, p0 + pc) of columns [0, n) of op(B), panel after panel of kNr columns (zero past n):
// out[(panel * pc + p) * kNr + j].
void pack_b(const bfloat16* b, bool trans_b, int64_t ldb, int64_t n, int64_t k, int64_t p0, int64_t pc,
            uint32_t* out) {
  for (int64_t j0 = 0; j0 < n; j0 += kNr) {
    uint32_t* panel = out + j0 / kNr * pc * kNr;
    const int64_t nj = std::min(kNr, n - j0);
    if (nj < kNr) std::fill(panel, panel + pc * kNr, 0u);
    if (trans_b) {  // pairs are words of B's rows; k odd: the last one is half past the row
      const bool odd_tail = p0 + pc == (k + 1) / 2 && k % 2 == 1;
      transpose_words(b + j0 * ldb, ldb, nj, p0, odd_tail ? pc - 1 : pc, panel);
      for (int64_t j = 0; odd_tail && j < nj; ++j) {
        panel[(pc - 1) * kNr + j] = pair_word(b[(j0 + j) * ldb + k - 1].bits, 0);
      }
    } else {  // pairs interleave two rows of B
      for (int64_t p = 0; p < pc; ++p) {
        const int64_t kk = 2 * (p0 + p);
        interleave(b + kk * ldb + j0, kk + 1 < k ? b + (kk + 1) * ldb + j0 : nullptr, nj, panel + p * kNr);
      }
    }
  }
}

// Where a tile reads A: the word of row r and pair p at rows[r] + p * step bytes for the first
// `full` pairs, then (k odd, last slice) one pair from tail[r].
struct RowWords {
  const char* rows[kMr];
  int64_t step, full;
  const uint32_t* tail;
};

// One step along k of a tile: its rows' pair words against a 32-column pair panel.
OAO_AVX512_BF16_TARGET __attribute__((always_inline)) inline void dot_step(__m512 (&acc)[kMr][2],
                                                                           const uint32_t* bp,
                                                                           const uint32_t (&words)[kMr]) {
  const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
#pragma GCC unroll 8
  for (int r = 0; r < kMr; ++r) {
    const __m512bh w = (__m512bh)_mm512_set1_epi32(static_cast<int>(words[r]));
    acc[r][0] = _mm512_dpbf16_ps(acc[r][0], w, b0);
    acc[r][1] = _mm512_dpbf16_ps(acc[r][1], w, b1);
  }
}

OAO_AVX512_BF16_TARGET void tile(const RowWords& a, const uint32_t* b, int64_t rows, int64_t cols, float alpha,
                                 float beta, float* c, int64_t ldc) {
  __m512 acc[kMr][2];
  for (auto& r : acc) r[0] = r[1] = _mm512_setzero_ps();
  uint32_t words[kMr];
  for (int64_t p = 0; p < a.full; ++p) {
#pragma GCC unroll 8
    for (int r = 0; r < kMr; ++r) std::memcpy(&words[r], a.rows[r] + p * a.step, sizeof(uint32_t));
    dot_step(acc, b + p * kNr, words);
  }
  if (a.tail != nullptr) {
    std::copy(a.tail, a.tail + kMr, words);
    dot_step(acc, b + a.full * kNr, words);
  }
  const __mmask16 m0 = cols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? 0xFFFF : cols > 16 ? static_cast<__mmask16>((1u << (cols - 16)) - 1) : 0;
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int64_t r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    __m512 v0 = _mm512_mul_ps(acc[r][0], va), v1 = _mm512_mul_ps(acc[r][1], va);
    if (beta != 0.f) {
      v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), v0);
      v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), v1);
    }
    _mm512_mask_storeu_ps(cr, m0, v0);
    _mm512_mask_storeu_ps(cr + 16, m1, v1);
  }
}

void gemm_dot_products(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                       const bfloat16* a, int64_t lda, const bfloat16* b, int64_t ldb, float beta, float* c,
                       int64_t ldc) {
  thread_local std::vector<uint32_t> packed_b, packed_a;
  const int64_t pairs = (k + 1) / 2, panels = (n + kNr - 1) / kNr;
  for (int64_t p0 = 0; p0 < pairs; p0 += kKc) {
    const int64_t pc = std::min(kKc, pairs - p0);
    packed_b.resize(static_cast<size_t>(panels * pc * kNr));
    pack_b(b, trans_b, ldb, n, k, p0, pc, packed_b.data());
    const bool last = p0 + pc == pairs;
    for (int64_t i0 = 0; i0 < m; i0 += kMr) {
      const int64_t rows = std::min(kMr, m - i0);
      RowWords words{};
      uint32_t tail[kMr];
      if (trans_a) {
        // A's pairs interleave two of its stored rows: packed, k's padding included (rows past m: 0).
        packed_a.assign(static_cast<size_t>(pc * kMr), 0u);
        for (int64_t p = 0; p < pc; ++p) {
          const int64_t kk = 2 * (p0 + p);
          interleave(a + kk * lda + i0, kk + 1 < k ? a + (kk + 1) * lda + i0 : nullptr, rows, &packed_a[p * kMr]);
        }
        for (int64_t r = 0; r < kMr; ++r) words.rows[r] = reinterpret_cast<const char*>(packed_a.data() + r);
        words.step = kMr * sizeof(uint32_t);
        words.full = pc;
      } else {
        // A's pairs are words of its rows, read in place; rows past m repeat the last one.
        const bool odd_tail = last && k % 2 == 1;
        for (int64_t r = 0; r < kMr; ++r) {
          const bfloat16* row = a + (i0 + std::min(r, rows - 1)) * lda;
          words.rows[r] = reinterpret_cast<const char*>(row + 2 * p0);
          if (odd_tail) tail[r] = pair_word(row[k - 1].bits, 0);
        }
        words.step = sizeof(uint32_t);
        words.full = odd_tail ? pc - 1 : pc;
        words.tail = odd_tail ? tail : nullptr;
      }
      for (int64_t j0 = 0; j0 < n; j0 += kNr) {
        tile(words, packed_b.data() + j0 / kNr * pc * kNr, rows, std::min(kNr, n - j0), alpha,
             p0 == 0 ? beta : 1.f, c + i0 * ldc + j0, ldc);
      }
    }
  }
}

// Depths [k0, k0 + kc) of op(X) (X stored along k or across it, at ld), widened to a packed float32
// matrix as stored.
void widen(const bfloat16* x, bool along_k, int64_t ld, int64_t other, int64_t k0, int64_t kc,
           std::vector<float>& out) {
  out.resize(static_cast<size_t>(other * kc));
  if (along_k) {
    for (int64_t r = 0; r < other; ++r) to_float32(x + r * ld + k0, kc, out.data() + r * kc);
  } else {
    for (int64_t r = 0; r < kc; ++r) to_float32(x + (k0 + r) * ld, other, out.data() + r * other);
  }
}

// Depths per widened slice: float32 copies a few hundred rows deep whatever k is.
constexpr int64_t kWidenDepth = 512;

void gemm_widened(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a,
                  int64_t lda, const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  thread_local std::vector<float> a32, b32;
  for (int64_t k0 = 0; k0 < k; k0 += kWidenDepth) {
    const int64_t kc = std::min(kWidenDepth, k - k0);
    widen(a, !trans_a, lda, m, k0, kc, a32);
    widen(b, trans_b, ldb, n, k0, kc, b32);
    gemm(trans_a, trans_b, m, n, kc, alpha, a32.data(), trans_a ? m : kc, b32.data(), trans_b ? kc : n,
         k0 == 0 ? beta : 1.f, c, ldc);
  }
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a,
               int64_t lda, const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return gemm(trans_a, trans_b, m, n, 0, alpha, nullptr, 1, nullptr, 1, beta, c, ldc);
  if (use_avx512_bf16()) return gemm_dot_products(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  gemm_widened(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace oao
