#include "kernels/lightning_indexer_grad.h"

#include <algorithm>
#include <vector>

#include "kernels/element.h"

namespace oao {
namespace {

// One token's share of d_key: the key rows it selected and the gradient of each, float32.
struct KeyRowGrads {
  std::vector<int64_t> rows;
  std::vector<float> grads;  // rows.size() x d
};

template <class T>
void to_float_rows(const T* src, int64_t count, float* dst) {
  for (int64_t i = 0; i < count; ++i) dst[i] = to_float(src[i]);
}

// Per-task working buffers, sized once and reused for every token of the task: zero-filling and
// faulting in megabytes per token cost as much as a GEMM.
struct Scratch {
  std::vector<float> dy_v, panel, q, scores, dq;
};

template <class T, class I>
struct TokenGrad {
  const T *query, *dy, *weights;
  const I* indices;
  const float* key_f;  // key in float32, all batches
  const TokenSpans& spans;
  int64_t n1, d, k;
  int sparse_mode;
  T *d_query, *d_weights;

  void operator()(int64_t t, int64_t b, KeyRowGrads& out, Scratch& scratch) const {
    const int64_t slots = counted_slots(spans, b, t - spans.query_begin(b), k, sparse_mode);
    std::vector<float>& dy_v = scratch.dy_v;
    dy_v.clear();
    out.rows.clear();
    for (int64_t slot = 0; slot < slots; ++slot) {
      const int64_t index = static_cast<int64_t>(indices[t * k + slot]);
      if (index == -1) continue;
      out.rows.push_back(spans.key_begin(b) + index);
      dy_v.push_back(to_float(dy[t * k + slot]));
    }
    const int64_t n = static_cast<int64_t>(out.rows.size());
    for (auto [buffer, size] : {std::pair{&scratch.panel, n * d},
                                {&scratch.q, n1 * d},
                                {&scratch.scores, n1 * n},
                                {&scratch.dq, n1 * d}}) {
      if (static_cast<int64_t>(buffer->size()) < size) buffer->resize(size);
    }
    float *panel = scratch.panel.data(), *q = scratch.q.data(), *scores = scratch.scores.data(),
          *dq = scratch.dq.data();
    for (int64_t v = 0; v < n; ++v) std::copy_n(key_f + out.rows[v] * d, d, panel + v * d);
    to_float_rows(query + t * n1 * d, n1 * d, q);

    gemm(false, true, n1, n, d, q, panel, scores);  // s = q . panel^T
    for (int64_t j = 0; j < n1; ++j) {              // scores become g
      const float dw = relu_backward_row(scores + j * n, dy_v.data(), to_float(weights[t * n1 + j]), n);
      d_weights[t * n1 + j] = from_float<T>(dw);
    }
    gemm(false, false, n1, d, n, scores, panel, dq);  // dq = g . panel
    for (int64_t i = 0; i < n1 * d; ++i) d_query[t * n1 * d + i] = from_float<T>(dq[i]);
    out.grads.resize(n * d);
    gemm(true, false, n, d, n1, scores, q, out.grads.data());  // dkv = g^T . q
  }
};

}  // namespace

template <class T, class I>
void lightning_indexer_grad(const T* query, const T* key, const T* dy, const I* indices, const T* weights,
                            const TokenSpans& spans, int64_t n1, int64_t d, int64_t k, int sparse_mode,
                            T* d_query, T* d_key, T* d_weights, const Parallel& parallel) {
  const int64_t tokens = spans.tokens(), key_rows = spans.key_rows();
  std::vector<float> key_f(key_rows * d), d_key_f(key_rows * d, 0.f);
  to_float_rows(key, key_rows * d, key_f.data());
  const std::vector<int64_t> batch = spans.batch_of_tokens();
  const TokenGrad<T, I> token_grad{query, dy, weights, indices,     key_f.data(), spans,
                                   n1,    d,  k,       sparse_mode, d_query,      d_weights};

  // Tokens go in chunks whose key-row gradients are kept (about 64 MiB at most) and then added
  // into d_key by strips of rows, each strip in token then slot order: the sums do not depend on
  // which thread computed what.
  const int64_t chunk = std::max<int64_t>(1, (int64_t(64) << 20) / std::max<int64_t>(1, k * d * 4));
  const int64_t wanted_strips = std::max<int64_t>(1, block_count(key_rows, d));
  const int64_t strip_rows = std::max<int64_t>(1, (key_rows + wanted_strips - 1) / wanted_strips);
  const int64_t strips = (key_rows + strip_rows - 1) / strip_rows;
  std::vector<KeyRowGrads> grads(static_cast<size_t>(std::min(chunk, tokens)));
  std::vector<std::vector<std::pair<int64_t, int64_t>>> by_strip(strips);  // (token in chunk, slot)
  for (int64_t first = 0; first < tokens; first += chunk) {
    const int64_t count = std::min(chunk, tokens - first);
    const size_t tasks = static_cast<size_t>(std::min<int64_t>(count, 64));
    parallel.for_each(tasks, [&](size_t task) {
      single_threaded_blas();
      Scratch scratch;
      for (int64_t i = block_begin(task, tasks, count); i < block_begin(task + 1, tasks, count); ++i) {
        token_grad(first + i, batch[first + i], grads[i], scratch);
      }
    });
    for (auto& list : by_strip) list.clear();
    for (int64_t i = 0; i < count; ++i) {
      for (size_t v = 0; v < grads[i].rows.size(); ++v)
        by_strip[grads[i].rows[v] / strip_rows].push_back({i, v});
    }
    parallel.for_each(static_cast<size_t>(strips), [&](size_t strip) {
      for (const auto& [i, v] : by_strip[strip]) {
        add_into(d_key_f.data() + grads[i].rows[v] * d, grads[i].grads.data() + v * d, d);
      }
    });
  }
  parallel.for_each(static_cast<size_t>(strips), [&](size_t strip) {
    const int64_t end = std::min(key_rows, (static_cast<int64_t>(strip) + 1) * strip_rows) * d;
    for (int64_t i = static_cast<int64_t>(strip) * strip_rows * d; i < end; ++i)
      d_key[i] = from_float<T>(d_key_f[i]);
  });
}

#define OAO_INSTANTIATE(T, I)                                                                               \
  template void lightning_indexer_grad<T, I>(const T*, const T*, const T*, const I*, const T*,              \
                                             const TokenSpans&, int64_t, int64_t, int64_t, int, T*, T*, T*, \
                                             const Parallel&);
OAO_INSTANTIATE(float, int32_t)
OAO_INSTANTIATE(float, int64_t)
OAO_INSTANTIATE(half, int32_t)
OAO_INSTANTIATE(half, int64_t)
OAO_INSTANTIATE(bfloat16, int32_t)
OAO_INSTANTIATE(bfloat16, int64_t)
#undef OAO_INSTANTIATE

}  // namespace oao
