#include "kernels/lightning_indexer_grad.h"

#include <algorithm>
#include <memory>
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
// dQ is summed, and a token's d_key rows within a strip computed, at most this many rows at a
// time: at these sizes OpenBLAS's small-matrix kernels beat its packed GEMM, and a block of d_key
// rows stays in L1 while it is added into d_key.
constexpr int64_t kBlockRows = 64;
// The gathered key rows (and a block of d_key rows) take at most about this much, or one row, so
// that scratch does not grow with K x D: 2048 rows at D = 128.
constexpr int64_t kPanelBytes = int64_t(1) << 20;
// Tokens are handled in chunks whose per-row state (g, slots x heads in float32, the state passed
// from the first phase to the second, and the rows' bookkeeping) takes at most about this much,
// so that it is still in cache when read back: 16 tokens of 2048 slots at 64 heads. A token whose
// slots alone exceed it is handled alone, in pieces of its slots.
constexpr int64_t kChunkBytes = int64_t(12) << 20;

// Key rows are gathered with this many rows requested ahead.
constexpr int64_t kGatherAhead = 8;

// A buffer that only grows and is never zero-filled (each use writes what it reads): filling the
// megabytes of gathered rows and of g took a few percent of the run.
template <class V>
class Buffer {
 public:
  V* at_least(int64_t size) {
    if (size > size_) {
      data_.reset(new V[size]);
      size_ = size;
    }
    return data_.get();
  }
  V* data() const { return data_.get(); }

 private:
  std::unique_ptr<V[]> data_;
  int64_t size_ = 0;
};

// Sorts items[0, n) by key(item) in [0, range), keeping the order of equal keys: counting sorts on
// up to 11 bits of the key at a time, lowest first, so the table has at most 2048 counts however
// large the range. `spare` holds n items; the result is in items or spare, whichever is returned.
template <class Item, class Key>
Item* stable_sort_by(Item* items, Item* spare, int64_t n, int64_t range, Key key,
                     std::vector<int64_t>& counts) {
  constexpr int kDigitBits = 11;
  int bits = 0;
  while ((int64_t(1) << bits) < range) ++bits;
  for (int shift = 0; shift < bits; shift += kDigitBits) {
    const int64_t mask = (int64_t(1) << std::min(kDigitBits, bits - shift)) - 1;
    counts.assign(mask + 2, 0);
    for (int64_t i = 0; i < n; ++i) ++counts[((key(items[i]) >> shift) & mask) + 1];
    for (int64_t c = 0; c <= mask; ++c) counts[c + 1] += counts[c];
    for (int64_t i = 0; i < n; ++i) spare[counts[(key(items[i]) >> shift) & mask]++] = items[i];
    std::swap(items, spare);
  }
  return items;
}

// Where a unit's rows in strip `strip` begin (they end where the next run begins).
struct StripRun {
  int64_t strip, begin;
};

// Rows [begin, end) of unit `unit` in strip `strip`: the second phase's work, by strip.
struct Entry {
  int64_t strip, unit, begin, end;
};

// The slots [first_slot, end_slot) of one token: all of them, or a piece of a token that has
// more than a chunk's worth.
struct Unit {
  int64_t token, first_slot, end_slot;
  int64_t offset;  // where its rows' state starts in the chunk's arrays
  int64_t rows = 0, runs = 0;  // selected rows and strips they touch, found by the first phase
};

// Per-row state a chunk holds: g, row, dy, strip run, entry, the entry's sorted copy and group.
inline int64_t row_state_bytes(int64_t n1) {
  return n1 * static_cast<int64_t>(sizeof(float)) + sizeof(int64_t) + sizeof(float) + sizeof(StripRun) +
         2 * sizeof(Entry) + sizeof(int64_t);
}

// What the first phase leaves for the second about a chunk's units, in arrays shared by the chunk
// (a unit's rows start at its offset), grown to the largest chunk of the call.
struct ChunkState {
  Buffer<int64_t> rows;   // selected key rows, by strip, in slot order within a strip
  Buffer<float> dy;       // dy of each row
  Buffer<StripRun> runs;  // a unit's strips, ascending (at most one per row)
  Buffer<float> g;        // rows x n1: the scores, then g
  Buffer<float> q;        // units x n1 x d: the query in float32, unless T is float
  Buffer<Entry> entries, sorted;
  Buffer<int64_t> groups;  // where each strip's entries begin in `sorted`
};

// Working buffers of the first phase, for one unit at a time.
struct Scratch {
  Buffer<int32_t> slots, spare;  // the unit's selected slots, sorted by strip
  std::vector<int64_t> counts;   // the sort's table
  Buffer<float> panel;           // gathered key rows
  Buffer<float> w, dw;           // weights and d_weights
  Buffer<float> dq;              // d_query, unless T is float
};

template <class T, class I>
struct Grad {
  const T *query, *key, *dy, *weights;
  const I* indices;
  const TokenSpans& spans;
  const std::vector<int64_t>& batch;
  int64_t n1, d, k;
  int sparse_mode;
  T *d_query, *d_weights;
  float* d_key_f;  // key_rows x d float32 sums: d_key itself when T is float
  int64_t panel_rows, sum_rows;  // rows gathered, and d_key rows computed, at a time

  int64_t slots(int64_t t) const {
    const int64_t b = batch[t];
    return counted_slots(spans, b, t - spans.query_begin(b), k, sparse_mode);
  }

  const float* q_of(const Unit& u, int64_t i, const ChunkState& c) const {
    if constexpr (std::is_same_v<T, float>) {
      return query + u.token * n1 * d;
    } else {
      return c.q.data() + i * n1 * d;
    }
  }

  // First phase, unit i of the chunk: sorts its selected rows by strip, gathers them a panel at a
  // time, and computes the scores S = Q Kg^T (as rows x heads), g (in place of S), and adds onto
  // d_weights and d_query = g^T Kg, which the first piece of a token starts and the last writes.
  void first_phase(Unit& u, int64_t i, ChunkState& c, Scratch& s) const {
    const int64_t t = u.token, b = batch[t], key_begin = spans.key_begin(b);
    const bool first = u.first_slot == 0, last = u.end_slot == slots(t);

    int32_t* selected = s.slots.at_least(u.end_slot - u.first_slot);
    int64_t n = 0;
    for (int64_t slot = u.first_slot; slot < u.end_slot; ++slot) {
      if (indices[t * k + slot] != -1) selected[n++] = static_cast<int32_t>(slot);
    }
    const int64_t strip_begin = key_begin / kStripRows;
    const auto strip_of = [&](int32_t slot) {
      return (key_begin + static_cast<int64_t>(indices[t * k + slot])) / kStripRows - strip_begin;
    };
    const int64_t strip_range = (spans.key_end[b] + kStripRows - 1) / kStripRows - strip_begin;
    selected = stable_sort_by(selected, s.spare.at_least(n), n, strip_range, strip_of, s.counts);
    int64_t* rows = c.rows.data() + u.offset;
    float* dy_v = c.dy.data() + u.offset;
    StripRun* runs = c.runs.data() + u.offset;
    u.rows = n;
    u.runs = 0;
    for (int64_t v = 0; v < n; ++v) {
      rows[v] = key_begin + static_cast<int64_t>(indices[t * k + selected[v]]);
      dy_v[v] = to_float(dy[t * k + selected[v]]);
      const int64_t strip = rows[v] / kStripRows;
      if (u.runs == 0 || runs[u.runs - 1].strip != strip) runs[u.runs++] = {strip, v};
    }

    if constexpr (!std::is_same_v<T, float>) to_float32(query + t * n1 * d, n1 * d, c.q.data() + i * n1 * d);
    const float* q = q_of(u, i, c);
    float *w = s.w.at_least(n1), *dw = s.dw.at_least(n1);
    to_float32(weights + t * n1, n1, w);
    if (first) std::fill(dw, dw + n1, 0.f);
    float* dq;
    if constexpr (std::is_same_v<T, float>) {
      dq = d_query + t * n1 * d;
    } else {
      dq = s.dq.at_least(n1 * d);
    }

    float* g = c.g.data() + u.offset * n1;
    float* panel = s.panel.at_least(std::min(n, panel_rows) * d);
    bool overwrite = first;  // the token's first dQ slice starts the sum
    for (int64_t v0 = 0; v0 < n; v0 += panel_rows) {
      const int64_t m = std::min(panel_rows, n - v0);
      for (int64_t v = v0; v < v0 + m; ++v) {
        // The rows are scattered over the keys: without asking for them ahead, each waits for L3.
        if (v + kGatherAhead < n) {
          const char* ahead = reinterpret_cast<const char*>(key + rows[v + kGatherAhead] * d);
          for (size_t byte = 0; byte < d * sizeof(T); byte += 64) __builtin_prefetch(ahead + byte);
        }
        to_float32(key + rows[v] * d, d, panel + (v - v0) * d);
      }
      gemm(false, true, m, n1, d, panel, q, g + v0 * n1);  // S^T = Kg Q^T
      relu_backward(g + v0 * n1, dy_v + v0, w, m, n1, dw);
      // dQ = g^T Kg, kBlockRows rows at a time, each slice added onto the previous ones.
      for (int64_t v = v0; v < v0 + m; v += kBlockRows) {
        gemm(true, false, n1, d, std::min(v0 + m - v, kBlockRows), g + v * n1, panel + (v - v0) * d, dq,
             !overwrite);
        overwrite = false;
      }
    }
    if (overwrite) std::fill(dq, dq + n1 * d, 0.f);  // no selected rows: an empty sum
    if (last) {
      from_float32(dw, n1, d_weights + t * n1);
      if constexpr (!std::is_same_v<T, float>) from_float32(dq, n1 * d, d_query + t * n1 * d);
    }
  }

  // Second phase: adds dKg = g Q of each unit of the chunk into the d_key rows it selected, one
  // task per strip the chunk touches, each in unit (so token) then slot order.
  void second_phase(const std::vector<Unit>& units, ChunkState& c, const Parallel& parallel) const {
    int64_t count = 0;
    for (const Unit& u : units) count += u.runs;
    Entry* entries = c.entries.at_least(count);
    int64_t e = 0;
    for (size_t i = 0; i < units.size(); ++i) {
      const StripRun* runs = c.runs.data() + units[i].offset;
      for (int64_t r = 0; r < units[i].runs; ++r) {
        const int64_t end = r + 1 < units[i].runs ? runs[r + 1].begin : units[i].rows;
        entries[e++] = {runs[r].strip, static_cast<int64_t>(i), runs[r].begin, end};
      }
    }
    const int64_t strips = (spans.key_rows() + kStripRows - 1) / kStripRows;
    std::vector<int64_t> table;
    const Entry* sorted = stable_sort_by(entries, c.sorted.at_least(count), count, strips,
                                         [](const Entry& x) { return x.strip; }, table);
    int64_t* groups = c.groups.at_least(count + 1);
    int64_t touched = 0;
    for (int64_t j = 0; j < count; ++j) {
      if (j == 0 || sorted[j].strip != sorted[j - 1].strip) groups[touched++] = j;
    }
    groups[touched] = count;

    parallel.for_each(static_cast<size_t>(touched), [&](size_t strip) {
      single_threaded_blas();
      Buffer<float> block;
      float* out = block.at_least(sum_rows * d);
      for (int64_t j = groups[strip]; j < groups[strip + 1]; ++j) {
        const Unit& u = units[sorted[j].unit];
        const int64_t* rows = c.rows.data() + u.offset;
        const float* g = c.g.data() + u.offset * n1;
        const float* q = q_of(u, sorted[j].unit, c);
        for (int64_t v = sorted[j].begin; v < sorted[j].end; v += sum_rows) {
          const int64_t m = std::min(sum_rows, sorted[j].end - v);
          gemm(false, false, m, d, n1, g + v * n1, q, out);
          for (int64_t r = 0; r < m; ++r) add_into(d_key_f + rows[v + r] * d, out + r * d, d);
        }
      }
    });
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
  const size_t key_blocks = block_count(static_cast<size_t>(key_rows), static_cast<size_t>(d));
  parallel.for_each(key_blocks, [&](size_t block) {
    std::fill(d_key_f + block_begin(block, key_blocks, key_rows) * d,
              d_key_f + block_begin(block + 1, key_blocks, key_rows) * d, 0.f);
  });

  const std::vector<int64_t> batch = spans.batch_of_tokens();
  const int64_t row_bytes = static_cast<int64_t>(d * sizeof(float));
  int64_t panel_rows = std::max<int64_t>(1, kPanelBytes / row_bytes);
  if (panel_rows >= kBlockRows) panel_rows -= panel_rows % kBlockRows;  // dQ's slices stay whole
  const int64_t sum_rows = std::clamp<int64_t>(kPanelBytes / row_bytes, 1, kBlockRows);
  const Grad<T, I> grad{query,       key,     dy,        weights, indices,    spans,    batch, n1, d, k,
                        sparse_mode, d_query, d_weights, d_key_f, panel_rows, sum_rows};

  ChunkState chunk;
  std::vector<Unit> units;
  // Sizes the chunk's arrays for `units`, placing each unit's rows after the previous one's.
  const auto allocate = [&] {
    int64_t rows = 0;
    for (Unit& u : units) {
      u.offset = rows;
      rows += u.end_slot - u.first_slot;
    }
    chunk.rows.at_least(rows);
    chunk.dy.at_least(rows);
    chunk.runs.at_least(rows);
    chunk.g.at_least(rows * n1);
    if constexpr (!std::is_same_v<T, float>) chunk.q.at_least(static_cast<int64_t>(units.size()) * n1 * d);
  };
  BufferPool<Scratch> scratch;
  single_threaded_blas();

  const int64_t piece = std::max<int64_t>(1, kChunkBytes / row_state_bytes(n1));
  if (k > piece) {
    // Each token alone, in pieces of its slots: its d_weights and d_query carry over in one
    // Scratch, its d_key rows are added piece after piece, so still in slot order.
    Scratch carried;
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t end = grad.slots(t);
      for (int64_t first = 0;;) {
        units.assign(1, Unit{t, first, std::min(end, first + piece), 0});
        allocate();
        grad.first_phase(units[0], 0, chunk, carried);
        grad.second_phase(units, chunk, parallel);
        first = units[0].end_slot;
        if (first == end) break;
      }
    }
  } else {
    // Chunks of whole tokens, as many in each as the budget allows for K slots (and the query in
    // float32), then evened out.
    const int64_t token_bytes = std::is_same_v<T, float> ? 0 : n1 * d * static_cast<int64_t>(sizeof(float));
    const int64_t token_state = k * row_state_bytes(n1) + token_bytes + static_cast<int64_t>(sizeof(Unit));
    const int64_t most = std::clamp<int64_t>(kChunkBytes / token_state, 1, tokens);
    const int64_t chunks = (tokens + most - 1) / most, per_chunk = (tokens + chunks - 1) / chunks;
    for (int64_t first = 0; first < tokens; first += per_chunk) {
      const int64_t count = std::min(per_chunk, tokens - first);
      units.clear();
      for (int64_t t = first; t < first + count; ++t) units.push_back(Unit{t, 0, grad.slots(t), 0});
      allocate();
      parallel.for_each(static_cast<size_t>(count), [&](size_t i) {
        single_threaded_blas();
        std::unique_ptr<Scratch> buffers = scratch.take();
        grad.first_phase(units[i], static_cast<int64_t>(i), chunk, *buffers);
        scratch.give(std::move(buffers));
      });
      grad.second_phase(units, chunk, parallel);
    }
  }

  if constexpr (!std::is_same_v<T, float>) {
    parallel.for_each(key_blocks, [&](size_t block) {
      const int64_t begin = block_begin(block, key_blocks, key_rows) * d;
      from_float32(d_key_f + begin, block_begin(block + 1, key_blocks, key_rows) * d - begin, d_key + begin);
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
