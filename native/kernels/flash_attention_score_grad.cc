#include "kernels/flash_attention_score_grad.h"

#include <algorithm>
#include <vector>

#include "kernels/element.h"

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

// A task's tiles: stacked query rows (m x D), their dy (m x Dv) and Drow (m), the probabilities
// (m x n) and dP then dS (m x n), the float32 key and value blocks of 16-bit types, and the sums
// the task owns (dq: m x D; dk: n x D, dv: n x Dv).
struct Tiles {
  std::vector<float> q, dy, drow, p, ds, k, v, dq, dk, dv, out;
};

// Loads the query-side tiles of task t (heads stacked head by head): q, dy and Drow =
// rowsum(dy * attention_in), the last in one fixed order.
template <class T>
void load_queries(const Tensors<T>& x, const FlashAttentionGeometry& g, const FaQueryTask& t, Tiles& w) {
  const int64_t b = t.batch, rows = t.rows.end - t.rows.begin, m = (t.head_end - t.head_begin) * rows;
  const int64_t d = g.d, dv = g.dv;
  w.q.resize(static_cast<size_t>(m * d));
  w.dy.resize(static_cast<size_t>(m * dv));
  w.out.resize(static_cast<size_t>(rows * dv));
  w.drow.resize(static_cast<size_t>(m));
  for (int64_t h = t.head_begin; h < t.head_end; ++h) {
    const int64_t r0 = (h - t.head_begin) * rows;
    const int64_t q_at = g.query_at(g.query, b, h, t.rows.begin);
    const int64_t o_at = g.query_at(g.out, b, h, t.rows.begin);
    fa_load_rows(x.query + q_at, g.query.row, rows, d, w.q.data() + r0 * d);
    fa_load_rows(x.dy + o_at, g.out.row, rows, dv, w.dy.data() + r0 * dv);
    fa_load_rows(x.attention_in + o_at, g.out.row, rows, dv, w.out.data());
    for (int64_t r = 0; r < rows; ++r) {
      const float* dyr = w.dy.data() + (r0 + r) * dv;
      const float* o = w.out.data() + r * dv;
      float sum = 0.f;
      for (int64_t j = 0; j < dv; ++j) sum += dyr[j] * o[j];
      w.drow[r0 + r] = sum;
    }
  }
}

// One tile of task t's m rows against keys [k0, k0 + n) (kt, vt: float32 views of their key and
// value rows): P into w.p and dS = P (dy v^T - Drow) into w.ds.
template <class T>
void tile(const Tensors<T>& x, const FlashAttentionGeometry& g, const FaQueryTask& t, int64_t k0, int64_t n,
          FaRows kt, FaRows vt, Tiles& w) {
  const int64_t b = t.batch, rows = t.rows.end - t.rows.begin, m = (t.head_end - t.head_begin) * rows;
  w.p.resize(static_cast<size_t>(m * n));
  w.ds.resize(static_cast<size_t>(m * n));
  float* p = w.p.data();
  fa_gemm(false, true, m, n, g.d, g.scale, w.q.data(), g.d, kt.data, kt.ld, 0.f, p, n);
  for (int64_t r = 0; r < m; ++r) {
    const int64_t h = t.head_begin + r / rows, q = t.rows.begin + r % rows;
    float* row = p + r * n;
    fa_mask_row(g, x.mask, b, h, q, k0, n, row);
    const int64_t at = g.query_at(g.stats, b, h, q);
    const float sum = x.softmax_sum[at];
    if (!(sum > 0.f)) {  // a row with no allowed key has no gradient
      std::fill(row, row + n, 0.f);
      continue;
    }
    fa_exp_row(row, n, x.softmax_max[at]);
    fa_scale_row(row, n, 1.f / sum);
  }
  float* ds = w.ds.data();
  fa_gemm(false, true, m, n, g.dv, 1.f, w.dy.data(), g.dv, vt.data, vt.ld, 0.f, ds, n);
  for (int64_t r = 0; r < m; ++r) {
    const float drow = w.drow[r];
    const float* pr = p + r * n;
    float* dr = ds + r * n;
    for (int64_t j = 0; j < n; ++j) dr[j] = pr[j] * (dr[j] - drow);
  }
}

// Pass 1, one block of keys of one key/value head: dk and dv summed over the query tasks that may
// read them, in their fixed order.
template <class T>
void key_block(const Tensors<T>& x, const FlashAttentionGeometry& g, const std::vector<FaQueryTask>& tasks,
               int64_t b, int64_t kv, int64_t k0, Tiles& w) {
  const int64_t n = std::min(kFaKeyBlock, g.key_rows(b) - k0), d = g.d, dv = g.dv;
  w.dk.assign(static_cast<size_t>(n * d), 0.f);
  w.dv.assign(static_cast<size_t>(n * dv), 0.f);
  const FaRange queries = fa_block_queries(g, b, {k0, k0 + n});
  const FaRows kt = fa_rows(x.key + g.key_at(g.key, b, kv, k0), g.key.row, n, d, w.k);
  const FaRows vt = fa_rows(x.value + g.key_at(g.value, b, kv, k0), g.value.row, n, dv, w.v);
  for (const FaQueryTask& t : tasks) {
    const bool reads = t.rows.end > queries.begin && t.rows.begin < queries.end;
    if (t.batch != b || t.kv_head != kv || !reads) continue;
    const int64_t m = (t.head_end - t.head_begin) * (t.rows.end - t.rows.begin);
    load_queries(x, g, t, w);
    tile(x, g, t, k0, n, kt, vt, w);
    fa_gemm(true, false, n, dv, m, 1.f, w.p.data(), n, w.dy.data(), dv, 1.f, w.dv.data(), dv);
    fa_gemm(true, false, n, d, m, g.scale, w.ds.data(), n, w.q.data(), d, 1.f, w.dk.data(), d);
  }
  for (int64_t j = 0; j < n; ++j) {
    from_float32(w.dk.data() + j * d, d, x.dk + g.key_at(g.key, b, kv, k0 + j));
    from_float32(w.dv.data() + j * dv, dv, x.dv + g.key_at(g.value, b, kv, k0 + j));
  }
}

// Pass 2, one query task: dq = scale sum over its key blocks of dS k, the blocks in order.
template <class T>
void query_task(const Tensors<T>& x, const FlashAttentionGeometry& g, const FaQueryTask& t, Tiles& w) {
  const int64_t b = t.batch, rows = t.rows.end - t.rows.begin, m = (t.head_end - t.head_begin) * rows;
  const int64_t d = g.d, dv = g.dv;
  w.dq.assign(static_cast<size_t>(m * d), 0.f);
  const FaRange keys = fa_block_keys(g, b, t.rows);
  if (!keys.empty()) load_queries(x, g, t, w);
  // Key blocks on pass 1's boundaries, so that both passes recompute the same tiles.
  const int64_t first = keys.empty() ? keys.end : keys.begin / kFaKeyBlock * kFaKeyBlock;
  for (int64_t k0 = first; k0 < keys.end; k0 += kFaKeyBlock) {
    const int64_t n = std::min(kFaKeyBlock, g.key_rows(b) - k0);
    const FaRows kt = fa_rows(x.key + g.key_at(g.key, b, t.kv_head, k0), g.key.row, n, d, w.k);
    const FaRows vt = fa_rows(x.value + g.key_at(g.value, b, t.kv_head, k0), g.value.row, n, dv, w.v);
    tile(x, g, t, k0, n, kt, vt, w);
    fa_gemm(false, false, m, d, n, g.scale, w.ds.data(), n, kt.data, kt.ld, 1.f, w.dq.data(), d);
  }
  for (int64_t r = 0; r < m; ++r) {
    const int64_t h = t.head_begin + r / rows, q = t.rows.begin + r % rows;
    from_float32(w.dq.data() + r * d, d, x.dq + g.query_at(g.query, b, h, q));
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
  const std::vector<FaQueryTask> tasks = fa_query_tasks(g);
  struct KeyTask {
    int64_t batch, kv_head, k0;
  };
  std::vector<KeyTask> key_tasks;
  for (int64_t b = 0; b < g.batches(); ++b) {
    for (int64_t kv = 0; kv < g.n2; ++kv) {
      for (int64_t k0 = 0; k0 < g.key_rows(b); k0 += kFaKeyBlock) key_tasks.push_back({b, kv, k0});
    }
  }
  BufferPool<Tiles> pool;
  parallel.for_each(key_tasks.size(), [&](size_t i) {
    std::unique_ptr<Tiles> tiles = pool.take();
    key_block(x, g, tasks, key_tasks[i].batch, key_tasks[i].kv_head, key_tasks[i].k0, *tiles);
    pool.give(std::move(tiles));
  });
  parallel.for_each(tasks.size(), [&](size_t i) {
    std::unique_ptr<Tiles> tiles = pool.take();
    query_task(x, g, tasks[i], *tiles);
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
