#include "kernels/lightning_indexer_grad.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "kernels/element.h"

namespace oao {
namespace {

// d_key is summed by strips of key rows. One task at a time owns a strip and adds into it in token
// then slot order, so the sums do not depend on which thread computed what. 256 rows: a strip of
// d_key stays in L2 while a task adds into it, and at K=2048 of S2=8192 a token has about 64 rows
// in each strip, one GEMM of OpenBLAS's small-matrix size (faster than one large GEMM per token).
constexpr int64_t kStripRows = 256;
// A token's d_key rows within a strip are computed at most this many at a time, into a buffer that
// stays in L1 while they are added into d_key.
constexpr int64_t kBlockRows = 64;
// Tokens are handled in chunks whose g (slots x heads, float32, the state passed from the first
// phase to the second) takes about this many bytes, so that it is still in cache when read back.
constexpr int64_t kChunkBytes = int64_t(8) << 20;

// Key rows are gathered with this many rows requested ahead.
constexpr int64_t kGatherAhead = 8;

// A float32 buffer that only grows and is never zero-filled (each use writes what it reads): filling
// the megabytes of gathered rows and of g took a few percent of the run.
class Floats {
 public:
  float* at_least(int64_t size) {
    if (size > size_) {
      data_.reset(new float[size]);
      size_ = size;
    }
    return data_.get();
  }
  float* data() const { return data_.get(); }

 private:
  std::unique_ptr<float[]> data_;
  int64_t size_ = 0;
};

// What the first phase leaves for the second about one token.
struct TokenRows {
  std::vector<int64_t> rows;         // selected key rows, by strip, in slot order within a strip
  std::vector<int64_t> strip_begin;  // where each strip's rows start in `rows` (strips + 1)
  Floats g;                          // rows x n1: the scores, then g
  Floats q_f;                        // the query in float32, unless T is float
  const float* q = nullptr;          // n1 x d: the query in float32
};

// Working buffers of the first phase, for one token at a time.
struct Scratch {
  std::vector<int64_t> next;  // next free place of each strip while sorting by strip
  Floats dy_v;                // dy of each row of TokenRows::rows
  Floats panel;               // the selected key rows
  Floats w, dw;               // weights and d_weights
  Floats dq;                  // d_query, unless T is float
};

// Buffers for the tasks running at one time: a task takes one and gives it back, so each is
// allocated and faulted in once per call, however many threads run (what a buffer holds never
// outlives its task, so which one a task gets does not change any result).
template <class B>
class BufferPool {
 public:
  std::unique_ptr<B> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return std::make_unique<B>();
    std::unique_ptr<B> buffer = std::move(free_.back());
    free_.pop_back();
    return buffer;
  }
  void give(std::unique_ptr<B> buffer) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(buffer));
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<B>> free_;
};

template <class T, class I>
struct Grad {
  const T *query, *key, *dy, *weights;
  const I* indices;
  const TokenSpans& spans;
  int64_t n1, d, k;
  int sparse_mode;
  T *d_query, *d_weights;
  float* d_key_f;  // key_rows x d float32 sums: d_key itself when T is float
  T* d_key;
  int64_t strips;

  // First phase, token t of batch b: sorts its rows by strip, gathers them, and computes the
  // scores S = Q Kg^T (as slots x heads), d_weights, g (in place of S) and d_query = g^T Kg.
  void token(int64_t t, int64_t b, TokenRows& out, Scratch& scratch) const {
    const int64_t slots = counted_slots(spans, b, t - spans.query_begin(b), k, sparse_mode);
    const int64_t key_begin = spans.key_begin(b);
    out.strip_begin.assign(strips + 1, 0);
    for (int64_t slot = 0; slot < slots; ++slot) {
      const int64_t index = static_cast<int64_t>(indices[t * k + slot]);
      if (index != -1) ++out.strip_begin[(key_begin + index) / kStripRows + 1];
    }
    for (int64_t s = 0; s < strips; ++s) out.strip_begin[s + 1] += out.strip_begin[s];
    const int64_t n = out.strip_begin[strips];
    scratch.next.assign(out.strip_begin.begin(), out.strip_begin.end() - 1);
    out.rows.resize(n);
    float* dy_v = scratch.dy_v.at_least(n);
    for (int64_t slot = 0; slot < slots; ++slot) {
      const int64_t index = static_cast<int64_t>(indices[t * k + slot]);
      if (index == -1) continue;
      const int64_t row = key_begin + index, place = scratch.next[row / kStripRows]++;
      out.rows[place] = row;
      dy_v[place] = to_float(dy[t * k + slot]);
    }

    float* panel = scratch.panel.at_least(n * d);
    for (int64_t v = 0; v < n; ++v) {
      // The rows are scattered over the keys: without asking for them ahead, each waits for L3.
      if (v + kGatherAhead < n) {
        const char* ahead = reinterpret_cast<const char*>(key + out.rows[v + kGatherAhead] * d);
        for (size_t byte = 0; byte < d * sizeof(T); byte += 64) __builtin_prefetch(ahead + byte);
      }
      to_float32(key + out.rows[v] * d, d, panel + v * d);
    }
    if constexpr (std::is_same_v<T, float>) {
      out.q = query + t * n1 * d;
    } else {
      to_float32(query + t * n1 * d, n1 * d, out.q_f.at_least(n1 * d));
      out.q = out.q_f.data();
    }
    float *w = scratch.w.at_least(n1), *dw = scratch.dw.at_least(n1);
    to_float32(weights + t * n1, n1, w);

    float* g = out.g.at_least(n * n1);
    gemm(false, true, n, n1, d, panel, out.q, g);  // S^T = Kg Q^T
    relu_backward(g, dy_v, w, n, n1, dw);
    from_float32(dw, n1, d_weights + t * n1);
    float* dq;
    if constexpr (std::is_same_v<T, float>) {
      dq = d_query + t * n1 * d;
    } else {
      dq = scratch.dq.at_least(n1 * d);
    }
    // dQ = g^T Kg, kBlockRows slots at a time, each slice added onto the previous ones: at these
    // sizes OpenBLAS's small-matrix kernels beat its packed GEMM over all the slots.
    gemm(true, false, n1, d, std::min(n, kBlockRows), g, panel, dq);
    for (int64_t v = kBlockRows; v < n; v += kBlockRows) {
      gemm(true, false, n1, d, std::min(n - v, kBlockRows), g + v * n1, panel + v * d, dq, true);
    }
    if constexpr (!std::is_same_v<T, float>) from_float32(dq, n1 * d, d_query + t * n1 * d);
  }

  // Second phase, one strip: adds dKg = g Q of each token of the chunk into the strip's d_key rows,
  // in token then slot order. The first chunk starts the sums at zero; the last converts them.
  void strip(int64_t s, const std::vector<TokenRows>& chunk, int64_t count, bool first, bool last) const {
    const int64_t begin = s * kStripRows * d, end = std::min(spans.key_rows(), (s + 1) * kStripRows) * d;
    if (first) std::fill(d_key_f + begin, d_key_f + end, 0.f);
    Floats block;
    float* out = block.at_least(kBlockRows * d);
    for (int64_t i = 0; i < count; ++i) {
      const TokenRows& token = chunk[i];
      for (int64_t v = token.strip_begin[s]; v < token.strip_begin[s + 1]; v += kBlockRows) {
        const int64_t rows = std::min(kBlockRows, token.strip_begin[s + 1] - v);
        gemm(false, false, rows, d, n1, token.g.data() + v * n1, token.q, out);
        for (int64_t r = 0; r < rows; ++r) add_into(d_key_f + token.rows[v + r] * d, out + r * d, d);
      }
    }
    if constexpr (!std::is_same_v<T, float>) {
      if (last) from_float32(d_key_f + begin, end - begin, d_key + begin);
    }
  }
};

}  // namespace

template <class T, class I>
void lightning_indexer_grad(const T* query, const T* key, const T* dy, const I* indices, const T* weights,
                            const TokenSpans& spans, int64_t n1, int64_t d, int64_t k, int sparse_mode,
                            T* d_query, T* d_key, T* d_weights, const Parallel& parallel) {
  const int64_t tokens = spans.tokens(), key_rows = spans.key_rows();
  if (tokens == 0) {
    std::fill(d_key, d_key + key_rows * d, from_float<T>(0.f));
    return;
  }
  std::unique_ptr<float[]> sums;  // d_key's float32 sums, unless T is float
  float* d_key_f;
  if constexpr (std::is_same_v<T, float>) {
    d_key_f = d_key;
  } else {
    sums.reset(new float[key_rows * d]);
    d_key_f = sums.get();
  }
  const std::vector<int64_t> batch = spans.batch_of_tokens();
  const int64_t strips = (key_rows + kStripRows - 1) / kStripRows;
  const Grad<T, I> grad{query, key,         dy,      weights,   indices, spans, n1,    d,
                        k,     sparse_mode, d_query, d_weights, d_key_f, d_key, strips};

  const int64_t chunk = std::clamp<int64_t>(kChunkBytes / std::max<int64_t>(1, k * n1 * 4), 1, tokens);
  std::vector<TokenRows> rows(chunk);
  BufferPool<Scratch> scratch;
  for (int64_t first = 0; first < tokens; first += chunk) {
    const int64_t count = std::min(chunk, tokens - first);
    parallel.for_each(static_cast<size_t>(count), [&](size_t i) {
      single_threaded_blas();
      std::unique_ptr<Scratch> buffers = scratch.take();
      grad.token(first + i, batch[first + i], rows[i], *buffers);
      scratch.give(std::move(buffers));
    });
    parallel.for_each(static_cast<size_t>(strips), [&](size_t s) {
      single_threaded_blas();
      grad.strip(s, rows, count, first == 0, first + count == tokens);
    });
  }
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
