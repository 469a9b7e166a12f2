// What LightningIndexer and its grad share: which query tokens and key rows belong to which batch,
// how many top-k slots of a token count (sparse_mode), the index check, float32 GEMM and the pool
// of task buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/parallel.h"

namespace oao {

// Batch b owns query tokens [query_end[b-1], query_end[b]) and key rows [key_end[b-1], key_end[b])
// (cumulative ends, the first batch starting at 0), as TND's actual_seq_lengths give them; BSND
// batches are all S1 tokens and S2 key rows long.
struct TokenSpans {
  std::vector<int64_t> query_end, key_end;

  int64_t tokens() const { return query_end.empty() ? 0 : query_end.back(); }
  int64_t key_rows() const { return key_end.empty() ? 0 : key_end.back(); }
  int64_t query_begin(int64_t b) const { return b == 0 ? 0 : query_end[b - 1]; }
  int64_t key_begin(int64_t b) const { return b == 0 ? 0 : key_end[b - 1]; }
  // The batch of each token, in token order.
  std::vector<int64_t> batch_of_tokens() const;
};

// Top-k slots that count for the token at position `s` of batch b: all k for sparse_mode 0;
// for sparse_mode 3 (causal, right-aligned) min(k, S2_b - S1_b + s + 1), at least 0.
int64_t counted_slots(const TokenSpans& spans, int64_t b, int64_t s, int64_t k, int sparse_mode);

// The first counted slot whose index is neither -1 nor inside [0, S2_b), if any.
struct BadIndex {
  int64_t token = -1, slot = -1, index = 0, key_rows = 0;
};
template <class I>
BadIndex find_bad_index(const I* indices, const TokenSpans& spans, int64_t k, int sparse_mode);


// For the scores s of a token (n slots x h heads, row-major): dw[j] += relu(s[v,j]) dy[v] over v,
// in order (d_weights, whose sum may go on from an earlier block of slots), and s becomes
// g[v,j] = weight[j] dy[v] where s[v,j] > 0, else 0.
void relu_backward(float* s, const float* dy, const float* weight, int64_t n, int64_t h, float* dw);

// acc[0, n) += add[0, n).
void add_into(float* acc, const float* add, int64_t n);

// dst[0, n) = src[0, n) converted to float32, and back (rounded to nearest even).
template <class T>
void to_float32(const T* src, int64_t n, float* dst);
template <class T>
void from_float32(const float* src, int64_t n, T* dst);

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


}  // namespace oao
