#include "kernels/lightning_indexer.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
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

struct Candidate {
  float score;
  int32_t index;
};

// Descending score, then ascending key index; NaN after every number. A strict total order on a
// token's candidates (their indices differ).
bool ranks_before(const Candidate& a, const Candidate& b) {
  if (std::isnan(a.score) || std::isnan(b.score)) {
    return std::isnan(a.score) ? (std::isnan(b.score) && a.index < b.index) : true;
  }
  return a.score > b.score || (a.score == b.score && a.index < b.index);
}

// The best `kept` of a token's keys, fed a block of scores at a time, in memory for 2 x kept
// candidates however many keys there are. When the buffer fills, its best `kept` stay and the
// last of them becomes the bar: a later key that does not rank before it has `kept` better ones
// already. The order being strict and total, the result is exactly the head of the full sort.
class TopK {
 public:
  void start(int64_t kept, int64_t keys) {
    kept_ = kept;
    has_bar_ = false;
    buffer_.clear();
    buffer_.reserve(static_cast<size_t>(std::min(2 * kept, keys)));
  }

  void add(const float* scores, int64_t first_index, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const Candidate c{scores[i], static_cast<int32_t>(first_index + i)};
      if (has_bar_ && !ranks_before(c, bar_)) continue;
      buffer_.push_back(c);
      if (static_cast<int64_t>(buffer_.size()) == 2 * kept_) {
        std::nth_element(buffer_.begin(), buffer_.begin() + (kept_ - 1), buffer_.end(), ranks_before);
        buffer_.resize(kept_);
        bar_ = buffer_.back();
        has_bar_ = true;
      }
    }
  }

  // The kept best, in order.
  const std::vector<Candidate>& finish() {
    if (static_cast<int64_t>(buffer_.size()) > kept_) {
      std::nth_element(buffer_.begin(), buffer_.begin() + kept_, buffer_.end(), ranks_before);
      buffer_.resize(kept_);
    }
    std::sort(buffer_.begin(), buffer_.end(), ranks_before);
    return buffer_;
  }

 private:
  int64_t kept_ = 0;
  bool has_bar_ = false;
  Candidate bar_{};
  std::vector<Candidate> buffer_;
};

}  // namespace

template <class T>
void lightning_indexer(const T* query, const T* key, const T* weights, const TokenSpans& spans, int64_t n1,
                       int64_t d, int64_t k, int sparse_mode, int32_t* indices, T* values,
                       const Parallel& parallel) {
  const int64_t key_rows = spans.key_rows();
  std::vector<float> key_copy;  // the key in float32, unless T is float
  const float* key_f;
  if constexpr (std::is_same_v<T, float>) {
    key_f = key;
  } else {
    key_copy.resize(key_rows * d);
    to_float32(key, key_rows * d, key_copy.data());
    key_f = key_copy.data();
  }
  const std::vector<int64_t> batch = spans.batch_of_tokens();

  // Tasks take runs of tokens and reuse their buffers (zero-filling and faulting in megabytes per
  // token would cost as much as the GEMM). Up to `tile` tokens of one batch are scored by one GEMM
  // against the keys the last of them may see, so each key block is packed once per tile, not per
  // token; earlier tokens ignore the columns past their own allowed keys. The keys go in blocks
  // whose scores (tile x heads x columns) take at most about kScoreBytes (in L2 while they are
  // summed, and memory that does not grow with the keys); the tile shrinks, down to one token,
  // where the heads would leave fewer than kMinColumns columns.
  constexpr int64_t kTile = 4, kScoreBytes = int64_t(1) << 20, kMinColumns = 256;
  const int64_t row_bytes = n1 * static_cast<int64_t>(sizeof(float));
  const int64_t tile = std::clamp<int64_t>(kScoreBytes / (kMinColumns * row_bytes), 1, kTile);
  const int64_t columns = std::max<int64_t>(1, kScoreBytes / (tile * row_bytes));
  const int64_t tokens = spans.tokens();
  const size_t tasks = static_cast<size_t>(std::min<int64_t>(tokens, 64));
  parallel.for_each(tasks, [&](size_t task) {
    single_threaded_blas();
    std::vector<float> q, scores, index_score;
    std::vector<TopK> best(tile);
    const int64_t task_end = block_begin(task + 1, tasks, tokens);
    for (int64_t first = block_begin(task, tasks, tokens); first < task_end;) {
      const int64_t b = batch[first], key_begin = spans.key_begin(b);
      const int64_t count = std::min({tile, task_end - first, spans.query_end[b] - first});
      const int64_t cols = allowed_keys(spans, b, first + count - 1 - spans.query_begin(b), sparse_mode);
      q.resize(count * n1 * d);
      to_float32(query + first * n1 * d, count * n1 * d, q.data());
      for (int64_t t = first; t < first + count; ++t) {
        const int64_t n = allowed_keys(spans, b, t - spans.query_begin(b), sparse_mode);
        best[t - first].start(std::min(k, n), n);
      }
      for (int64_t c0 = 0; c0 < cols; c0 += columns) {
        const int64_t width = std::min(columns, cols - c0);
        if (static_cast<int64_t>(scores.size()) < count * n1 * width) scores.resize(count * n1 * width);
        gemm(false, true, count * n1, width, d, q.data(), key_f + (key_begin + c0) * d, scores.data());
        for (int64_t t = first; t < first + count; ++t) {
          const int64_t allowed = allowed_keys(spans, b, t - spans.query_begin(b), sparse_mode);
          const int64_t n = std::min(width, allowed - c0);
          if (n <= 0) continue;
          index_score.assign(n, 0.f);
          const float* token_scores = scores.data() + (t - first) * n1 * width;
          for (int64_t j = 0; j < n1; ++j) {
            add_weighted_relu(index_score.data(), token_scores + j * width, to_float(weights[t * n1 + j]), n);
          }
          best[t - first].add(index_score.data(), c0, n);
        }
      }
      for (int64_t t = first; t < first + count; ++t) {
        const std::vector<Candidate>& kept = best[t - first].finish();
        for (int64_t slot = 0; slot < k; ++slot) {
          const bool used = slot < static_cast<int64_t>(kept.size());
          indices[t * k + slot] = used ? kept[slot].index : -1;
          values[t * k + slot] = from_float<T>(used ? kept[slot].score : 0.f);
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
