#include "kernels/flash_attention_score.h"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/element.h"
#include "kernels/gemm_bf16.h"
#include "kernels/row.h"

namespace oao {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// A task's tiles: its stacked query rows (m x D), one block of scores then probabilities
// (m x kFaKeyBlock), the unnormalized output (m x Dv), each row's running max and sum, and the
// float32 key and value blocks of 16-bit types; with dot products, the query rows as given and the
// probabilities in bfloat16 instead of the float32 copies. Either way the probabilities enter P V
// as fa_round_to rounds them, their sum taken before.
struct Tiles {
  std::vector<float> q, s, o, max, sum, k, v;
  std::vector<bfloat16> q16, p16;
};

// One task: the rows of heads [head_begin, head_end) stacked, head by head, so that each key and
// value block is read (and converted) once for all of them and multiplied in one GEMM each.
template <class T>
void attend(const T* query, const T* key, const T* value, const uint8_t* mask,
            const FlashAttentionGeometry& g, const FaQueryTask& t, Tiles& w, T* out, float* softmax_max,
            float* softmax_sum) {
  const int64_t b = t.batch, rows = t.rows.end - t.rows.begin, m = (t.head_end - t.head_begin) * rows;
  const int64_t d = g.d, dv = g.dv;
  const bool dots = fa_dot_products<T>();
  w.q.resize(static_cast<size_t>(dots ? 0 : m * d));
  w.q16.resize(static_cast<size_t>(dots ? m * d : 0));
  w.p16.resize(static_cast<size_t>(dots ? m * kFaKeyBlock : 0));
  w.s.resize(static_cast<size_t>(m * kFaKeyBlock));
  w.o.assign(static_cast<size_t>(m * dv), 0.f);
  w.max.assign(static_cast<size_t>(m), -kInf);
  w.sum.assign(static_cast<size_t>(m), 0.f);
  for (int64_t h = t.head_begin; h < t.head_end; ++h) {
    const T* q = query + g.query_at(g.query, b, h, t.rows.begin);
    const int64_t r0 = (h - t.head_begin) * rows;
    if constexpr (std::is_same_v<T, bfloat16>) {
      for (int64_t r = 0; dots && r < rows; ++r) std::copy_n(q + r * g.query.row, d, w.q16.data() + (r0 + r) * d);
    }
    if (!dots) fa_load_rows(q, g.query.row, rows, d, w.q.data() + r0 * d);
  }
  const FaRange keys = fa_block_keys(g, b, t.rows);
  for (int64_t k0 = keys.begin; k0 < keys.end; k0 += kFaKeyBlock) {
    const int64_t n = std::min(kFaKeyBlock, keys.end - k0);
    const T* k = key + g.key_at(g.key, b, t.kv_head, k0);
    const T* v = value + g.key_at(g.value, b, t.kv_head, k0);
    float* s = w.s.data();
    FaRows vt{};
    if (!dots) {
      const FaRows kt = fa_rows(k, g.key.row, n, d, w.k);
      vt = fa_rows(v, g.value.row, n, dv, w.v);
      gemm(false, true, m, n, d, g.scale, w.q.data(), d, kt.data, kt.ld, 0.f, s, n);
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      gemm_bf16(false, true, m, n, d, g.scale, w.q16.data(), d, k, g.key.row, 0.f, s, n);
    }
    for (int64_t r = 0; r < m; ++r) {
      float* row = s + r * n;
      const float block_max =
          fa_mask_row(g, mask, b, t.head_begin + r / rows, t.rows.begin + r % rows, k0, n, row);
      const float old = w.max[r], now = std::max(old, block_max);
      if (now == -kInf) {  // nothing allowed yet: the row adds nothing
        std::fill(row, row + n, 0.f);
        continue;
      }
      const float sum = fa_exp_row(row, n, now);
      if (now != old) {  // the earlier blocks' terms rescaled to the new max (from -inf: to 0)
        const float factor = fa_exp(old - now);
        w.sum[r] *= factor;
        fa_scale_row(w.o.data() + r * dv, dv, factor);
        w.max[r] = now;
      }
      w.sum[r] += sum;
    }
    if (!dots) {
      fa_round_to<T>(s, m * n);
      gemm(false, false, m, dv, n, 1.f, s, n, vt.data, vt.ld, 1.f, w.o.data(), dv);
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      from_float32(s, m * n, w.p16.data());
      gemm_bf16(false, false, m, dv, n, 1.f, w.p16.data(), n, v, g.value.row, 1.f, w.o.data(), dv);
    }
  }
  for (int64_t r = 0; r < m; ++r) {
    const int64_t h = t.head_begin + r / rows, q = t.rows.begin + r % rows;
    float* o = w.o.data() + r * dv;
    const float sum = w.sum[r];
    if (sum > 0.f) {
      fa_scale_row(o, dv, 1.f / sum);
    } else {
      std::fill(o, o + dv, 0.f);  // no allowed key
    }
    from_float32(o, dv, out + g.query_at(g.out, b, h, q));
    const int64_t at = g.query_at(g.stats, b, h, q);
    std::fill(softmax_max + at, softmax_max + at + 8, w.max[r]);
    std::fill(softmax_sum + at, softmax_sum + at + 8, sum);
  }
}

}  // namespace

template <class T>
void flash_attention_score(const T* query, const T* key, const T* value, const uint8_t* mask,
                           const FlashAttentionGeometry& g, T* out, float* softmax_max, float* softmax_sum,
                           const Parallel& parallel) {
  single_threaded_blas();
  const std::vector<FaQueryTask> tasks = fa_query_tasks(g);
  BufferPool<Tiles> pool;
  parallel.for_each(tasks.size(), [&](size_t i) {
    std::unique_ptr<Tiles> tiles = pool.take();
    attend(query, key, value, mask, g, tasks[i], *tiles, out, softmax_max, softmax_sum);
    pool.give(std::move(tiles));
  });
}

template void flash_attention_score<float>(const float*, const float*, const float*, const uint8_t*,
                                           const FlashAttentionGeometry&, float*, float*, float*,
                                           const Parallel&);
template void flash_attention_score<half>(const half*, const half*, const half*, const uint8_t*,
                                          const FlashAttentionGeometry&, half*, float*, float*,
                                          const Parallel&);
template void flash_attention_score<bfloat16>(const bfloat16*, const bfloat16*, const bfloat16*,
                                              const uint8_t*, const FlashAttentionGeometry&, bfloat16*,
                                              float*, float*, const Parallel&);

}  // namespace oao
