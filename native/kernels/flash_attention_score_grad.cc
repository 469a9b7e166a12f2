#include "kernels/flash_attention_score_grad.h"

#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/element.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/row.h"
#include "kernels/vec512.h"

namespace oao {
namespace {

// The tensors one call reads and writes.
template <class T>
struct Tensors {
  const T *query, *key, *value, *dy, *attention_in;
  const uint8_t* mask;
  const float *softmax_max, *softmax_sum;
  T *dq, *dk, *dv;
};

// Where the query tasks' rows sit in the call's float32 scratch: task i's m stacked rows start at
// row offset[i], so q, dy, Drow and each split's dq partials are indexed alike and the tiles read
// them in place.
struct QueryScratch {
  std::vector<FaQueryTask> tasks;
  std::vector<int64_t> offset;  // tasks.size() + 1 entries
  // One allocation, left uninitialized (every element is written before it is read): q, dy, Drow,
  // then the dq partials of each split slot, rows x d apart.
  std::unique_ptr<float[]> buffer;
  float *q = nullptr, *dy = nullptr, *drow = nullptr, *partials = nullptr;
  // With dot products (fa_dot_products): q and dy also as given, stacked alike.
  std::unique_ptr<bfloat16[]> raw;
  bfloat16 *q16 = nullptr, *dy16 = nullptr;

  int64_t rows(size_t i) const { return offset[i + 1] - offset[i]; }
};

// Owners of the key axis: keys [k0, k1) of one batch and key/value head, whole blocks of `block`
// keys (the last may be short), given dk and dv alone and their own dq partials (slot `split`).
struct KeySplit {
  int64_t batch, kv_head, k0, k1, block;
  int split;
  size_t first_task, end_task;  // the (batch, kv_head)'s query tasks
};

// At most this many key splits per batch and key/value head: each holds a float32 dq partial, so
// the scratch stays a few times dq whatever the sequence length, and with batches and heads
// there are tasks enough for a few threads.
constexpr int kMaxSplits = 4;

// Keys per block: 512 rows of head dims up to 64 and 256 past that keep a tile's key, value, dk and
// dv rows and its P and dS within about a core's L2 (1 MiB on the machines measured), while the
// taller tiles of narrow heads halve what OpenBLAS packs per product.
int64_t key_block(const FlashAttentionGeometry& g) { return std::max(g.d, g.dv) <= 64 ? 512 : 256; }

// Per-tile buffers of one thread: P and dS (m x n, and rounded to bfloat16 with dot products),
// float32 key and value blocks of 16-bit types, and the block's dk and dv sums.
struct Tiles {
  std::vector<float> p, ds, k, v, dk, dv, out;
  std::vector<bfloat16> p16, ds16;
};

// Loads task i's q and dy into the scratch (heads stacked head by head) with Drow =
// rowsum(dy * attention_in), the last in one fixed order.
template <class T>
void load_queries(const Tensors<T>& x, const FlashAttentionGeometry& g, QueryScratch& s, size_t i,
                  std::vector<float>& out) {
  const FaQueryTask& t = s.tasks[i];
  const int64_t b = t.batch, rows = t.rows.end - t.rows.begin, d = g.d, dv = g.dv;
  out.resize(static_cast<size_t>(rows * dv));
  for (int64_t h = t.head_begin; h < t.head_end; ++h) {
    const int64_t r0 = s.offset[i] + (h - t.head_begin) * rows;
    const int64_t o_at = g.query_at(g.out, b, h, t.rows.begin);
    const int64_t q_at = g.query_at(g.query, b, h, t.rows.begin);
    if (s.q16 == nullptr) fa_load_rows(x.query + q_at, g.query.row, rows, d, s.q + r0 * d);  // dots: unread
    fa_load_rows(x.dy + o_at, g.out.row, rows, dv, s.dy + r0 * dv);
    fa_load_rows(x.attention_in + o_at, g.out.row, rows, dv, out.data());
    if constexpr (std::is_same_v<T, bfloat16>) {
      for (int64_t r = 0; s.q16 != nullptr && r < rows; ++r) {
        std::copy_n(x.query + q_at + r * g.query.row, d, s.q16 + (r0 + r) * d);
        std::copy_n(x.dy + o_at + r * g.out.row, dv, s.dy16 + (r0 + r) * dv);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float* dyr = s.dy + (r0 + r) * dv;
      const float* o = out.data() + r * dv;
      float sum = 0.f;
      for (int64_t j = 0; j < dv; ++j) sum += dyr[j] * o[j];
      s.drow[r0 + r] = sum;
    }
  }
}

// P = exp(S - softmax_max) / softmax_sum of task t's m rows against keys [k0, k0 + n), in place
// of the scores in p; 0 outside the keys a row may read, and in rows with no allowed key.
template <class T>
void probabilities(const Tensors<T>& x, const FlashAttentionGeometry& g, const FaQueryTask& t, int64_t k0,
                   int64_t n, float* p) {
  const int64_t b = t.batch, rows = t.rows.end - t.rows.begin, m = (t.head_end - t.head_begin) * rows;
  for (int64_t r = 0; r < m; ++r) {
    const int64_t h = t.head_begin + r / rows, q = t.rows.begin + r % rows;
    float* row = p + r * n;
    const int64_t at = g.query_at(g.stats, b, h, q);
    const float sum = x.softmax_sum[at];
    const FaRange keys = fa_row_keys(g, b, q);
    const int64_t lo = std::clamp<int64_t>(keys.begin - k0, 0, n),
                  hi = sum > 0.f ? std::clamp<int64_t>(keys.end - k0, lo, n) : lo;
    std::fill(row, row + lo, 0.f);
    std::fill(row + hi, row + n, 0.f);
    if (lo == hi) continue;
    if (x.mask != nullptr) fa_mask_row(g, x.mask, b, h, q, k0 + lo, hi - lo, row + lo);
    fa_exp_row(row + lo, hi - lo, x.softmax_max[at]);
    fa_scale_row(row + lo, hi - lo, 1.f / sum);
  }
}

// The keys [k0, k0 + n) of a tile: their rows as given (T's, read by the dot-product GEMMs) and
// their float32 rows (kt, vt: what the float32 GEMMs read; empty with dot products).
template <class T>
struct TileKeys {
  int64_t k0, n;
  const T *key, *value;
  FaRows kt, vt;
};

// dS = P * (dP - Drow) in place of dP, row by row; the same bits on both paths.
OAO_AVX512_TARGET void softmax_grad_avx512(const float* p, const float* drow, int64_t m, int64_t n, float* ds) {
  for (int64_t r = 0; r < m; ++r) {
    const __m512 dr = _mm512_set1_ps(drow[r]);
    const int64_t at = r * n;
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 left = j + 16 <= n ? 0xFFFF : static_cast<__mmask16>((1u << (n - j)) - 1);
      const __m512 pv = _mm512_maskz_loadu_ps(left, p + at + j), dp = _mm512_maskz_loadu_ps(left, ds + at + j);
      _mm512_mask_storeu_ps(ds + at + j, left, _mm512_mul_ps(pv, _mm512_sub_ps(dp, dr)));
    }
  }
}

void softmax_grad(const float* p, const float* drow, int64_t m, int64_t n, float* ds) {
  if (use_avx512()) return softmax_grad_avx512(p, drow, m, n, ds);
  for (int64_t r = 0; r < m; ++r) {
    const float dr = drow[r];
    const float* pr = p + r * n;
    float* sr = ds + r * n;
    for (int64_t j = 0; j < n; ++j) sr[j] = pr[j] * (sr[j] - dr);
  }
}

// One tile: query task i against the keys of `keys`, with P, dP, dS and the three sums it feeds:
// those keys' dk and dv (n rows at dk, dv_sum), and task i's dq partial (beta 0 on the split's
// first tile of the task). All five products multiply float32 copies; P and dS (from the unrounded
// P) as fa_round_to rounds them.
template <class T>
void tile(const Tensors<T>& x, const FlashAttentionGeometry& g, const QueryScratch& s, size_t i,
          const TileKeys<T>& keys, bool first, float* dq_partial, float* dk, float* dv_sum, Tiles& w) {
  const int64_t m = s.rows(i), n = keys.n, d = g.d, dv = g.dv;
  const float* q = s.q + s.offset[i] * d;
  const float* dy = s.dy + s.offset[i] * dv;
  w.p.resize(static_cast<size_t>(m * n));
  w.ds.resize(static_cast<size_t>(m * n));
  float *p = w.p.data(), *ds = w.ds.data();
  gemm(false, true, m, n, d, g.scale, q, d, keys.kt.data, keys.kt.ld, 0.f, p, n);
  probabilities(x, g, s.tasks[i], keys.k0, n, p);
  gemm(false, true, m, n, dv, 1.f, dy, dv, keys.vt.data, keys.vt.ld, 0.f, ds, n);
  softmax_grad(p, s.drow + s.offset[i], m, n, ds);
  fa_round_to<T>(p, m * n);
  fa_round_to<T>(ds, m * n);
  gemm(true, false, n, dv, m, 1.f, p, n, dy, dv, 1.f, dv_sum, dv);
  gemm(true, false, n, d, m, g.scale, ds, n, q, d, 1.f, dk, d);
  gemm(false, false, m, d, n, g.scale, ds, n, keys.kt.data, keys.kt.ld, first ? 0.f : 1.f,
       dq_partial + s.offset[i] * d, d);
}

// P and dS = P * (dP - Drow) rounded to bfloat16 (as from_float32 rounds), dP read from `dp`.
OAO_AVX512_BF16_TARGET void softmax_grad_bf16(const float* p, const float* drow, const float* dp, int64_t m,
                                              int64_t n, bfloat16* p16, bfloat16* ds16) {
  for (int64_t r = 0; r < m; ++r) {
    const __m512 dr = _mm512_set1_ps(drow[r]);
    const int64_t at = r * n;
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 left = j + 16 <= n ? 0xFFFF : static_cast<__mmask16>((1u << (n - j)) - 1);
      const __m512 pv = _mm512_maskz_loadu_ps(left, p + at + j);
      const __m512 ds = _mm512_mul_ps(pv, _mm512_sub_ps(_mm512_maskz_loadu_ps(left, dp + at + j), dr));
      _mm256_mask_storeu_epi16(p16 + at + j, left, _mm512_cvtepi32_epi16(round_to_bf16_512(pv)));
      _mm256_mask_storeu_epi16(ds16 + at + j, left, _mm512_cvtepi32_epi16(round_to_bf16_512(ds)));
    }
  }
}

// The same tile for bfloat16 with the CPU's bfloat16 dot products (fa_dot_products): S and dP multiply
// q, dy, the keys and values as given; P and dS are rounded to bfloat16 for the other three, as
// the vendor's kernel and PyTorch's do. Every sum is float32.
void tile_dot_products(const Tensors<bfloat16>& x, const FlashAttentionGeometry& g, const QueryScratch& s,
                       size_t i, const TileKeys<bfloat16>& keys, bool first, float* dq_partial, float* dk,
                       float* dv_sum, Tiles& w) {
  const int64_t m = s.rows(i), n = keys.n, d = g.d, dv = g.dv;
  const bfloat16* q = s.q16 + s.offset[i] * d;
  const bfloat16* dy = s.dy16 + s.offset[i] * dv;
  w.p.resize(static_cast<size_t>(m * n));
  w.ds.resize(static_cast<size_t>(m * n));
  w.p16.resize(static_cast<size_t>(m * n));
  w.ds16.resize(static_cast<size_t>(m * n));
  float *p = w.p.data(), *ds = w.ds.data();
  bfloat16 *p16 = w.p16.data(), *ds16 = w.ds16.data();
  gemm_bf16(false, true, m, n, d, g.scale, q, d, keys.key, g.key.row, 0.f, p, n);
  probabilities(x, g, s.tasks[i], keys.k0, n, p);
  gemm_bf16(false, true, m, n, dv, 1.f, dy, dv, keys.value, g.value.row, 0.f, ds, n);
  softmax_grad_bf16(p, s.drow + s.offset[i], ds, m, n, p16, ds16);
  gemm_bf16(true, false, n, dv, m, 1.f, p16, n, dy, dv, 1.f, dv_sum, dv);
  gemm_bf16(true, false, n, d, m, g.scale, ds16, n, q, d, 1.f, dk, d);
  gemm_bf16(false, false, m, d, n, g.scale, ds16, n, keys.key, g.key.row, first ? 0.f : 1.f,
            dq_partial + s.offset[i] * d, d);
}

// One key split: per block of its keys in order, the tiles of the query tasks that may read it in
// their order; the block's dk and dv are written once, the tasks' dq partials summed over the
// split's blocks in order. touched[i]: task i has a partial in this split.
template <class T>
void key_split(const Tensors<T>& x, const FlashAttentionGeometry& g, const QueryScratch& s,
               const KeySplit& ks, float* dq_partial, uint8_t* touched, Tiles& w) {
  const int64_t b = ks.batch, kv = ks.kv_head, d = g.d, dv = g.dv;
  for (int64_t k0 = ks.k0; k0 < ks.k1; k0 += ks.block) {
    const int64_t n = std::min(ks.block, ks.k1 - k0);
    w.dk.assign(static_cast<size_t>(n * d), 0.f);
    w.dv.assign(static_cast<size_t>(n * dv), 0.f);
    const T* key = x.key + g.key_at(g.key, b, kv, k0);
    const T* value = x.value + g.key_at(g.value, b, kv, k0);
    const bool dots = s.q16 != nullptr;
    const FaRows kt = dots ? FaRows{} : fa_rows(key, g.key.row, n, d, w.k);
    const FaRows vt = dots ? FaRows{} : fa_rows(value, g.value.row, n, dv, w.v);
    for (size_t i = ks.first_task; i < ks.end_task; ++i) {
      // Only the keys some row of the task may read: a causal or banded block's diagonal tiles
      // shrink to what the mask leaves instead of computing blocks of zeros.
      const FaRange range = fa_block_keys(g, b, s.tasks[i].rows);
      const int64_t lo = std::clamp<int64_t>(range.begin - k0, 0, n),
                    hi = std::clamp<int64_t>(range.end - k0, lo, n);
      if (lo == hi) continue;
      float *dk = w.dk.data() + lo * d, *dv_sum = w.dv.data() + lo * dv;
      if constexpr (std::is_same_v<T, bfloat16>) {
        if (dots) {
          const TileKeys<T> keys{k0 + lo, hi - lo, key + lo * g.key.row, value + lo * g.value.row, {}, {}};
          tile_dot_products(x, g, s, i, keys, !touched[i], dq_partial, dk, dv_sum, w);
          touched[i] = 1;
          continue;
        }
      }
      const FaRows kl{kt.data + lo * kt.ld, kt.ld}, vl{vt.data + lo * vt.ld, vt.ld};
      const TileKeys<T> keys{k0 + lo, hi - lo, key, value, kl, vl};
      tile(x, g, s, i, keys, !touched[i], dq_partial, dk, dv_sum, w);
      touched[i] = 1;
    }
    for (int64_t j = 0; j < n; ++j) {
      from_float32(w.dk.data() + j * d, d, x.dk + g.key_at(g.key, b, kv, k0 + j));
      from_float32(w.dv.data() + j * dv, dv, x.dv + g.key_at(g.value, b, kv, k0 + j));
    }
  }
}

// The splits of one batch's key/value head: at most kMaxSplits runs of whole key blocks, cut where
// the query rows reading them (the work, causal masks included) come closest to equal shares.
void add_splits(const FlashAttentionGeometry& g, int64_t b, int64_t kv, size_t first_task, size_t end_task,
                std::vector<KeySplit>& out) {
  const int64_t s2 = g.key_rows(b), block = key_block(g), blocks = (s2 + block - 1) / block;
  if (blocks == 0) return;
  std::vector<int64_t> work(static_cast<size_t>(blocks));
  int64_t total = 0;
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t k0 = k * block;
    const FaRange rows = fa_block_queries(g, b, {k0, std::min(s2, k0 + block)});
    total += work[k] = std::max<int64_t>(rows.end - rows.begin, 0) + 1;  // + 1: writing dk and dv
  }
  const int64_t splits = std::min<int64_t>(blocks, kMaxSplits);
  int64_t k = 0, done = 0;
  for (int64_t i = 0; i < splits; ++i) {
    const int64_t begin = k, goal = total * (i + 1) / splits, last = blocks - (splits - i - 1);
    // Take the next block while the split's end stays nearer its goal with it than without it.
    do done += work[k++];
    while (k < last && (i + 1 == splits || 2 * done + work[k] <= 2 * goal));
    out.push_back(
        {b, kv, begin * block, std::min(s2, k * block), block, static_cast<int>(i), first_task, end_task});
  }
}

// dq of task i: its partials summed over the splits in their order, rounded to T once (0 where no
// split has one: the rows read no key).
template <class T>
void reduce_dq(const Tensors<T>& x, const FlashAttentionGeometry& g, const QueryScratch& s, size_t i,
               int slots, const std::vector<uint8_t>& touched, std::vector<float>& sum) {
  const FaQueryTask& t = s.tasks[i];
  const int64_t rows = t.rows.end - t.rows.begin, m = s.rows(i), d = g.d, size = m * d;
  sum.assign(static_cast<size_t>(size), 0.f);
  bool first = true;
  for (int split = 0; split < slots; ++split) {
    if (!touched[split * s.tasks.size() + i]) continue;
    const float* p = s.partials + (split * s.offset.back() + s.offset[i]) * d;
    if (first) {
      std::copy(p, p + size, sum.begin());
    } else {
      for (int64_t j = 0; j < size; ++j) sum[j] += p[j];
    }
    first = false;
  }
  for (int64_t r = 0; r < m; ++r) {
    const int64_t h = t.head_begin + r / rows, q = t.rows.begin + r % rows;
    from_float32(sum.data() + r * d, d, x.dq + g.query_at(g.query, t.batch, h, q));
  }
}

}  // namespace

template <class T>
void flash_attention_score_grad(const T* query, const T* key, const T* value, const T* dy,
                                const uint8_t* mask, const float* softmax_max, const float* softmax_sum,
                                const T* attention_in, const FlashAttentionGeometry& g, T* dq, T* dk, T* dv,
                                const Parallel& parallel) {
  single_threaded_blas();
  const Tensors<T> x{query, key, value, dy, attention_in, mask, softmax_max, softmax_sum, dq, dk, dv};
  QueryScratch s;
  s.tasks = fa_query_tasks(g);
  s.offset.assign(s.tasks.size() + 1, 0);
  for (size_t i = 0; i < s.tasks.size(); ++i) {
    const FaQueryTask& t = s.tasks[i];
    s.offset[i + 1] = s.offset[i] + (t.head_end - t.head_begin) * (t.rows.end - t.rows.begin);
  }
  const size_t rows = static_cast<size_t>(s.offset.back());

  // Tasks are ordered by batch then key/value head (fa_query_tasks), so each pair's are one run.
  std::vector<KeySplit> splits;
  size_t first = 0;
  for (int64_t b = 0; b < g.batches(); ++b) {
    for (int64_t kv = 0; kv < g.n2; ++kv) {
      size_t end = first;
      while (end < s.tasks.size() && s.tasks[end].batch == b && s.tasks[end].kv_head == kv) ++end;
      add_splits(g, b, kv, first, end, splits);
      first = end;
    }
  }
  int slots = 0;
  for (const KeySplit& ks : splits) slots = std::max(slots, ks.split + 1);
  const size_t d = static_cast<size_t>(g.d), d_v = static_cast<size_t>(g.dv);
  s.buffer.reset(new float[rows * (d + d_v + 1 + static_cast<size_t>(slots) * d)]);
  s.q = s.buffer.get();
  s.dy = s.q + rows * d;
  s.drow = s.dy + rows * d_v;
  s.partials = s.drow + rows;
  if (fa_dot_products<T>()) {
    s.raw.reset(new bfloat16[rows * (d + d_v)]);
    s.q16 = s.raw.get();
    s.dy16 = s.q16 + rows * d;
  }
  std::vector<uint8_t> touched(static_cast<size_t>(slots) * s.tasks.size(), 0);

  BufferPool<Tiles> pool;
  parallel.for_each(s.tasks.size(), [&](size_t i) {
    std::unique_ptr<Tiles> tiles = pool.take();
    load_queries(x, g, s, i, tiles->out);
    pool.give(std::move(tiles));
  });
  parallel.for_each(splits.size(), [&](size_t i) {
    std::unique_ptr<Tiles> tiles = pool.take();
    const KeySplit& ks = splits[i];
    key_split(x, g, s, ks, s.partials + ks.split * rows * d, touched.data() + ks.split * s.tasks.size(),
              *tiles);
    pool.give(std::move(tiles));
  });
  parallel.for_each(s.tasks.size(), [&](size_t i) {
    std::unique_ptr<Tiles> tiles = pool.take();
    reduce_dq(x, g, s, i, slots, touched, tiles->out);
    pool.give(std::move(tiles));
  });
}

#define OAO_FA_GRAD(T)                                                                                   \
  template void flash_attention_score_grad<T>(const T*, const T*, const T*, const T*, const uint8_t*,  \
                                              const float*, const float*, const T*,                     \
                                              const FlashAttentionGeometry&, T*, T*, T*, const Parallel&);
OAO_FA_GRAD(float)
OAO_FA_GRAD(half)
OAO_FA_GRAD(bfloat16)
#undef OAO_FA_GRAD

}  // namespace oao
