#include "kernels/lightning_indexer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/element.h"
#include "kernels/gemm_bf16.h"
#include "kernels/row.h"
#include "kernels/vec.h"

namespace oao {
namespace {

// Keys the token at position s of batch b may select: all for sparse_mode 0, the causal prefix
// (right-aligned) for 3.
int64_t allowed_keys(const TokenSpans& spans, int64_t b, int64_t s, int sparse_mode) {
  const int64_t s1 = spans.query_end[b] - spans.query_begin(b), s2 = spans.key_end[b] - spans.key_begin(b);
  return sparse_mode == 0 ? s2 : std::clamp<int64_t>(s2 - s1 + s + 1, 0, s2);
}

// Splits keys[0, n) (distinct, n >= 3) around the median of its first, middle and last: returns m,
// with keys[0, m) below the pivot and keys[m, n) not, 0 < m < n. Each key is written to both ends
// of `spare` and the end it belongs to advances, so no branch depends on the keys: the comparison
// sorts' mispredictions took as long as a tenth of the GEMM.
int64_t partition(uint64_t* keys, uint64_t* spare, int64_t n) {
  const uint64_t first = keys[0], middle = keys[n / 2], last = keys[n - 1];
  const uint64_t pivot = std::max(std::min(first, middle), std::min(std::max(first, middle), last));
  int64_t below = 0, above = n;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t key = keys[i];
    const bool less = key < pivot;
    spare[below] = key;
    spare[above - 1] = key;
    below += less;
    above -= !less;
  }
  std::copy_n(spare, n, keys);
  return below;
}

// Ranges this short are left to std::sort.
constexpr int64_t kShortRange = 16;

// Moves the `kept` smallest of keys[0, n) to keys[0, kept), in no particular order.
void select_smallest(uint64_t* keys, uint64_t* spare, int64_t n, int64_t kept) {
  int64_t lo = 0, hi = n;
  while (hi - lo > kShortRange) {
    const int64_t m = lo + partition(keys + lo, spare, hi - lo);
    if (m == kept) return;
    (m < kept ? lo : hi) = m;
  }
  std::sort(keys + lo, keys + hi);
}

// Sorts the `kept` smallest of keys[0, n) into keys[0, kept).
void sort_smallest(uint64_t* keys, uint64_t* spare, int64_t n, int64_t kept) {
  while (n > kShortRange) {
    const int64_t m = partition(keys, spare, n);
    if (m < kept) sort_smallest(keys + m, spare, n - m, kept - m);
    n = m;
    kept = std::min(kept, m);
  }
  std::sort(keys, keys + n);
}

// A key's rank as one number: the score's bits mapped so that unsigned order is descending score
// (-0 as +0, every NaN last), above the key index, so that ascending keys are the ranking order:
// descending score, then ascending key index, NaN after every number. Indices differ, so the
// order is strict and total, and a 64-bit compare is all a comparison costs.
uint32_t descending_bits(float score) {
  if (std::isnan(score)) return 0xFFFFFFFFu;
  uint32_t u;
  const float canonical = score + 0.f;  // -0 + 0 is +0
  std::memcpy(&u, &canonical, sizeof(u));
  return u >> 31 ? u : u ^ 0x7FFFFFFFu;
}

// The score back from its bits; a NaN comes back as the quiet NaN, whatever its payload was.
float score_of_bits(uint32_t bits) {
  if (bits == 0xFFFFFFFFu) return std::numeric_limits<float>::quiet_NaN();
  const uint32_t u = bits >> 31 ? bits : bits ^ 0x7FFFFFFFu;
  float score;
  std::memcpy(&score, &u, sizeof(score));
  return score;
}

// descending_bits of 8 scores.
OAO_AVX2 __m256i descending_bits_avx2(__m256 scores) {
  const __m256i u = _mm256_castps_si256(_mm256_add_ps(scores, _mm256_setzero_ps()));
  const __m256i flip = _mm256_andnot_si256(_mm256_srai_epi32(u, 31), _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(scores, scores, _CMP_UNORD_Q));
  return _mm256_or_si256(_mm256_xor_si256(u, flip), nan);
}

// The best `kept` of a token's keys, fed a block of scores at a time, in memory for 2 x kept
// candidates however many keys there are. When the buffer fills, its best `kept` stay and the
// last of them becomes the bar: a later key that does not rank before it has `kept` better ones
// already. The order being strict and total, the result is exactly the head of the full sort.
// Keys come in ascending index, so a later key ranks before the bar exactly when its score bits
// are below the bar's: one 32-bit compare, 8 keys at a time on AVX2.
class TopK {
 public:
  void start(int64_t kept, int64_t keys) {
    kept_ = kept;
    has_bar_ = false;
    index_bits_ = 0;
    while ((int64_t(1) << index_bits_) < keys) ++index_bits_;
    buffer_.clear();
    buffer_.reserve(static_cast<size_t>(std::min(2 * kept, keys)));
  }

  void add(const float* scores, int64_t first_index, int64_t n) {
    int64_t i = use_avx2() ? add_avx2(scores, first_index, n) : 0;
    for (; i < n; ++i) {
      const uint32_t bits = descending_bits(scores[i]);
      if (!has_bar_ || bits < bar_bits_) push(bits, first_index + i);
    }
  }

  // The kept best, in order.
  const std::vector<uint64_t>& finish() {
    const int64_t n = static_cast<int64_t>(buffer_.size());
    spare_.resize(buffer_.size());
    sort_smallest(buffer_.data(), spare_.data(), n, std::min(kept_, n));
    if (n > kept_) buffer_.resize(kept_);
    return buffer_;
  }
  int32_t index_of(uint64_t key) const {
    return static_cast<int32_t>(key & ((uint64_t(1) << index_bits_) - 1));
  }
  float score_of(uint64_t key) const { return score_of_bits(static_cast<uint32_t>(key >> index_bits_)); }

 private:
  void push(uint32_t bits, int64_t index) {
    buffer_.push_back(uint64_t(bits) << index_bits_ | static_cast<uint64_t>(index));
    if (static_cast<int64_t>(buffer_.size()) == 2 * kept_) {
      spare_.resize(buffer_.size());
      select_smallest(buffer_.data(), spare_.data(), 2 * kept_, kept_);
      buffer_.resize(kept_);
      bar_bits_ = static_cast<uint32_t>(*std::max_element(buffer_.begin(), buffer_.end()) >> index_bits_);
      has_bar_ = true;
    }
  }

  // Whole groups of 8 scores; returns how many it took. A bar set partway through a group only
  // applies from the next one: letting a few more keys in changes nothing but the work.
  OAO_AVX2_TARGET int64_t add_avx2(const float* scores, int64_t first_index, int64_t n) {
    const __m256i sign = _mm256_set1_epi32(INT32_MIN);  // unsigned compare as signed
    alignas(32) uint32_t bits[8];
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256i b = descending_bits_avx2(_mm256_loadu_ps(scores + i));
      unsigned mask = 0xFF;
      if (has_bar_) {
        const __m256i bar = _mm256_set1_epi32(static_cast<int32_t>(bar_bits_ ^ 0x80000000u));
        mask = static_cast<unsigned>(
            _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(bar, _mm256_xor_si256(b, sign)))));
        if (mask == 0) continue;
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(bits), b);
      for (; mask != 0; mask &= mask - 1) {
        const int lane = __builtin_ctz(mask);
        push(bits[lane], first_index + i + lane);
      }
    }
    return i;
  }

  int64_t kept_ = 0;
  bool has_bar_ = false;
  uint32_t bar_bits_ = 0;
  int index_bits_ = 0;  // the low bits of a key, as many as its token's key indices need
  std::vector<uint64_t> buffer_, spare_;
};

// out[s] = sum over heads j, in order, of weight[j] relu(scores[j * stride + s]), for s in [0, n):
// the heads of a block of outputs summed in registers, each score read once.
void plain_weighted_relu_sum(const float* scores, int64_t stride, const float* weight, int64_t heads,
                             int64_t begin, int64_t n, float* out) {
  for (int64_t s = begin; s < n; ++s) {
    float acc = 0.f;
    for (int64_t j = 0; j < heads; ++j) acc += weight[j] * std::max(scores[j * stride + s], 0.f);
    out[s] = acc;
  }
}

template <int kVectors>
OAO_AVX2 void weighted_relu_vectors(const float* scores, int64_t stride, const float* weight, int64_t heads,
                                    float* out) {
  const __m256 zero = _mm256_setzero_ps();
  __m256 acc[kVectors];
  for (int c = 0; c < kVectors; ++c) acc[c] = zero;
  for (int64_t j = 0; j < heads; ++j) {
    const __m256 w = _mm256_set1_ps(weight[j]);
    const float* row = scores + j * stride;
    for (int c = 0; c < kVectors; ++c) {
      const __m256 relu = _mm256_max_ps(zero, _mm256_loadu_ps(row + 8 * c));  // NaN stays NaN
      acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(w, relu));
    }
  }
  for (int c = 0; c < kVectors; ++c) _mm256_storeu_ps(out + 8 * c, acc[c]);
}

OAO_AVX2_TARGET void weighted_relu_sum_avx2(const float* scores, int64_t stride, const float* weight,
                                            int64_t heads, int64_t n, float* out) {
  int64_t s = 0;
  for (; s + 64 <= n; s += 64) weighted_relu_vectors<8>(scores + s, stride, weight, heads, out + s);
  for (; s + 8 <= n; s += 8) weighted_relu_vectors<1>(scores + s, stride, weight, heads, out + s);
  plain_weighted_relu_sum(scores, stride, weight, heads, s, n, out);
}

void weighted_relu_sum(const float* scores, int64_t stride, const float* weight, int64_t heads, int64_t n,
                       float* out) {
  if (use_avx2()) return weighted_relu_sum_avx2(scores, stride, weight, heads, n, out);
  plain_weighted_relu_sum(scores, stride, weight, heads, 0, n, out);
}

// What a task works in, taken from a BufferPool.
struct Scratch {
  std::vector<float> q, scores, index_score, w;  // q and w: a tile's query and weights in float32
  std::vector<TopK> best;                        // one per token of the tile
};

}  // namespace

template <class T>
void lightning_indexer(const T* query, const T* key, const T* weights, const TokenSpans& spans, int64_t n1,
                       int64_t d, int64_t k, int sparse_mode, int32_t* indices, T* values,
                       const Parallel& parallel) {
  const int64_t key_rows = spans.key_rows();
  // bfloat16 with AVX-512 BF16: the scores from the CPU's bfloat16 dot products on query and key as
  // given (gemm_bf16), every sum float32 as the float32 GEMM's.
  const bool dots = std::is_same_v<T, bfloat16> && use_avx512_bf16();
  std::vector<float> key_copy;  // the key in float32, unless T is float or dots
  const float* key_f = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    key_f = key;
  } else if (!dots) {
    key_copy.resize(key_rows * d);
    to_float32(key, key_rows * d, key_copy.data());
    key_f = key_copy.data();
  }
  const std::vector<int64_t> batch = spans.batch_of_tokens();

  // Up to `tile` tokens of one batch are scored by one GEMM against the keys the last of them may
  // see; earlier tokens ignore the columns past their own allowed keys. The keys go in blocks
  // whose scores (tile x heads x columns) take at most about kScoreBytes, memory that does not
  // grow with the keys. Tiles of kTileRows rows, because OpenBLAS packs a key block again for
  // every GEMM: the more rows, the fewer packings per FLOP. The tiles are also the unit of work,
  // a fixed blocking however many threads run. Measured at S1 = 32, S2 = 8192, N1 = 64, D = 128
  // on one thread, the whole kernel against a 1024^3 sgemm on the same OpenBLAS: 64-row GEMMs
  // (one token each, what splitting the tokens into 64 tasks gave) reached 47-60%; 512 rows x 512
  // columns 84-87%; 512 x 256 79-83%; 1024 x 256 81-85%, and 1024 rows would leave S1 = 16 a
  // single task for two threads.
  constexpr int64_t kTileRows = 512, kScoreBytes = int64_t(1) << 20, kMinColumns = 256;
  const int64_t row_bytes = n1 * static_cast<int64_t>(sizeof(float));
  const int64_t tile =
      std::max<int64_t>(1, std::min(kTileRows / n1, kScoreBytes / (kMinColumns * row_bytes)));
  const int64_t columns = std::max<int64_t>(1, kScoreBytes / (tile * row_bytes));
  const int64_t tokens = spans.tokens(), tiles = (tokens + tile - 1) / tile;
  const size_t tasks = static_cast<size_t>(std::min<int64_t>(tiles, 64));
  BufferPool<Scratch> pool;
  parallel.for_each(tasks, [&](size_t task) {
    single_threaded_blas();
    std::unique_ptr<Scratch> scratch = pool.take();
    std::vector<float>&q = scratch->q, &scores = scratch->scores, &index_score = scratch->index_score,
                       &w = scratch->w;
    std::vector<TopK>& best = scratch->best;
    best.resize(tile);
    const int64_t task_end = std::min(tokens, block_begin(task + 1, tasks, tiles) * tile);
    for (int64_t first = block_begin(task, tasks, tiles) * tile; first < task_end;) {
      const int64_t b = batch[first], key_begin = spans.key_begin(b);
      const int64_t count = std::min({tile, task_end - first, spans.query_end[b] - first});
      const int64_t cols = allowed_keys(spans, b, first + count - 1 - spans.query_begin(b), sparse_mode);
      const float* q_f = nullptr;
      if constexpr (std::is_same_v<T, float>) {
        q_f = query + first * n1 * d;
      } else if (!dots) {
        q.resize(count * n1 * d);
        to_float32(query + first * n1 * d, count * n1 * d, q.data());
        q_f = q.data();
      }
      w.resize(count * n1);
      to_float32(weights + first * n1, count * n1, w.data());
      for (int64_t t = first; t < first + count; ++t) {
        const int64_t n = allowed_keys(spans, b, t - spans.query_begin(b), sparse_mode);
        best[t - first].start(std::min(k, n), n);
      }
      for (int64_t c0 = 0; c0 < cols; c0 += columns) {
        const int64_t width = std::min(columns, cols - c0);
        if (static_cast<int64_t>(scores.size()) < count * n1 * width) scores.resize(count * n1 * width);
        if (static_cast<int64_t>(index_score.size()) < width) index_score.resize(width);
        if (!dots) {
          gemm(false, true, count * n1, width, d, q_f, key_f + (key_begin + c0) * d, scores.data());
        } else if constexpr (std::is_same_v<T, bfloat16>) {
          gemm_bf16(false, true, count * n1, width, d, 1.f, query + first * n1 * d, d, key + (key_begin + c0) * d, d,
                    0.f, scores.data(), width);
        }
        for (int64_t t = first; t < first + count; ++t) {
          const int64_t allowed = allowed_keys(spans, b, t - spans.query_begin(b), sparse_mode);
          const int64_t n = std::min(width, allowed - c0);
          if (n <= 0) continue;
          weighted_relu_sum(scores.data() + (t - first) * n1 * width, width, w.data() + (t - first) * n1, n1,
                            n, index_score.data());
          best[t - first].add(index_score.data(), c0, n);
        }
      }
      for (int64_t t = first; t < first + count; ++t) {
        TopK& top = best[t - first];
        const std::vector<uint64_t>& kept = top.finish();
        for (int64_t slot = 0; slot < k; ++slot) {
          const bool used = slot < static_cast<int64_t>(kept.size());
          indices[t * k + slot] = used ? top.index_of(kept[slot]) : -1;
          values[t * k + slot] = from_float<T>(used ? top.score_of(kept[slot]) : 0.f);
        }
      }
      first += count;
    }
    pool.give(std::move(scratch));
  });
}

template void lightning_indexer<float>(const float*, const float*, const float*, const TokenSpans&, int64_t,
                                       int64_t, int64_t, int, int32_t*, float*, const Parallel&);
template void lightning_indexer<half>(const half*, const half*, const half*, const TokenSpans&, int64_t,
                                      int64_t, int64_t, int, int32_t*, half*, const Parallel&);
template void lightning_indexer<bfloat16>(const bfloat16*, const bfloat16*, const bfloat16*,
                                          const TokenSpans&, int64_t, int64_t, int64_t, int, int32_t*,
                                          bfloat16*, const Parallel&);

}  // namespace oao
