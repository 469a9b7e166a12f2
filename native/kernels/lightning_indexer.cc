#include "kernels/lightning_indexer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/element.h"

namespace oao {
namespace {

// Keys the token at position s of batch b may select: all for sparse_mode 0, the causal prefix
// (right-aligned) for 3.
int64_t allowed_keys(const TokenSpans& spans, int64_t b, int64_t s, int sparse_mode) {
  const int64_t s1 = spans.query_end[b] - spans.query_begin(b), s2 = spans.key_end[b] - spans.key_begin(b);
  return sparse_mode == 0 ? s2 : std::clamp<int64_t>(s2 - s1 + s + 1, 0, s2);
}

// Descending score, then ascending key index; NaN after every number.
bool ranks_before(float a, int32_t ia, float b, int32_t ib) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? (std::isnan(b) && ia < ib) : true;
  return a > b || (a == b && ia < ib);
}

}  // namespace

template <class T>
void lightning_indexer(const T* query, const T* key, const T* weights, const TokenSpans& spans, int64_t n1,
                       int64_t d, int64_t k, int sparse_mode, int32_t* indices, T* values,
                       const Parallel& parallel) {
  const int64_t key_rows = spans.key_rows();
  std::vector<float> key_f(key_rows * d);
  to_float32(key, key_rows * d, key_f.data());
  const std::vector<int64_t> batch = spans.batch_of_tokens();

  // Tasks take runs of tokens and reuse their buffers (zero-filling and faulting in megabytes per
  // token would cost as much as the GEMM). Up to kTile tokens of one batch are scored by one GEMM
  // against the keys the last of them may see, so the key block is packed once per tile, not per
  // token; earlier tokens ignore the columns past their own allowed keys.
  constexpr int64_t kTile = 4;
  const int64_t tokens = spans.tokens();
  const size_t tasks = static_cast<size_t>(std::min<int64_t>(tokens, 64));
  parallel.for_each(tasks, [&](size_t task) {
    single_threaded_blas();
    std::vector<float> q, scores, index_score;
    std::vector<int32_t> order;
    const int64_t task_end = block_begin(task + 1, tasks, tokens);
    for (int64_t first = block_begin(task, tasks, tokens); first < task_end;) {
      const int64_t b = batch[first];
      const int64_t count = std::min({kTile, task_end - first, spans.query_end[b] - first});
      const int64_t cols = allowed_keys(spans, b, first + count - 1 - spans.query_begin(b), sparse_mode);
      q.resize(count * n1 * d);
      if (static_cast<int64_t>(scores.size()) < count * n1 * cols) scores.resize(count * n1 * cols);
      to_float32(query + first * n1 * d, count * n1 * d, q.data());
      gemm(false, true, count * n1, cols, d, q.data(), key_f.data() + spans.key_begin(b) * d, scores.data());

      for (int64_t t = first; t < first + count; ++t) {
        const int64_t n = allowed_keys(spans, b, t - spans.query_begin(b), sparse_mode);
        index_score.assign(n, 0.f);
        const float* token_scores = scores.data() + (t - first) * n1 * cols;
        for (int64_t j = 0; j < n1; ++j) {
          add_weighted_relu(index_score.data(), token_scores + j * cols, to_float(weights[t * n1 + j]), n);
        }
        const int64_t kept = std::min(k, n);
        order.resize(n);
        std::iota(order.begin(), order.end(), 0);
        auto better = [&](int32_t a, int32_t c) {
          return ranks_before(index_score[a], a, index_score[c], c);
        };
        // Partial sort: find the kept best in linear time, then order only those.
        if (kept < n) std::nth_element(order.begin(), order.begin() + kept, order.end(), better);
        std::sort(order.begin(), order.begin() + kept, better);
        for (int64_t slot = 0; slot < k; ++slot) {
          const bool used = slot < kept;
          indices[t * k + slot] = used ? order[slot] : -1;
          values[t * k + slot] = from_float<T>(used ? index_score[order[slot]] : 0.f);
        }
      }
      first += count;
    }
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
