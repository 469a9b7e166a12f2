// What RotaryPositionEmbedding and its grad share: every mode rotates pairs of elements of the
// last axis, (a, b) with b the partner of a, and mode 3 reads x (and writes dx) at different
// positions than dy, cos and sin. Kernels work on pair index p in [0, D/2): cos and sin are held
// per cos row as float32 arrays in pair order (the a's of all pairs, then the b's).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/element.h"
#include "kernels/parallel.h"
#include "kernels/vec.h"

namespace oao {

enum class RotaryPositionEmbeddingMode : int { kHalf = 0, kInterleave = 1, kQuarter = 2, kInterleaveHalf = 3 };

// Where pair p lives. In "split" rows the a's and b's form runs (b = a + offset); in
// "interleaved" rows pair p is the elements (2p, 2p + 1).
struct PairPositions {
  RotaryPositionEmbeddingMode mode;
  int64_t d;

  int64_t offset() const { return mode == RotaryPositionEmbeddingMode::kQuarter ? d / 4 : d / 2; }
  // Position of pair p's `a` in dy, cos and sin (its `b` is a + offset, except in mode 1: a + 1).
  int64_t a(int64_t p) const {
    switch (mode) {
      case RotaryPositionEmbeddingMode::kInterleave:
        return 2 * p;
      case RotaryPositionEmbeddingMode::kQuarter:
        return p < d / 4 ? p : p + d / 4;
      default:
        return p;
    }
  }
  int64_t b(int64_t p) const { return mode == RotaryPositionEmbeddingMode::kInterleave ? 2 * p + 1 : a(p) + offset(); }
  // Positions of pair p in x and dx: interleaved in mode 3, whose x is de-interleaved first.
  int64_t xa(int64_t p) const { return mode == RotaryPositionEmbeddingMode::kInterleaveHalf ? 2 * p : a(p); }
  int64_t xb(int64_t p) const { return mode == RotaryPositionEmbeddingMode::kInterleaveHalf ? 2 * p + 1 : b(p); }
  // Whether the AVX2 loops take every pair of a run 8 (or 16) at a time, without a last few one by
  // one: only then does every vector store land aligned for streaming stores.
  bool whole_vectors() const { return offset() % 8 == 0; }
};

// dy rows (all axes but the last) grouped by the cos row they use: row (c, m) is the m-th dy row
// reading cos row c, m counting over the axes cos broadcasts along, in order.
class RotaryPositionEmbeddingRows {
 public:
  // cos_shape has dy_shape's rank and the same last axis.
  RotaryPositionEmbeddingRows(const std::vector<int64_t>& dy_shape, const std::vector<int64_t>& cos_shape);

  int64_t cos_rows() const { return cos_rows_; }
  int64_t per_cos_row() const { return per_cos_row_; }
  // Dy rows per cos row that come from broadcast axes before cos's last own axis (B in BSND with
  // a 1S1D table): for a fixed index over those, consecutive cos rows are consecutive in memory.
  int64_t outer_per_cos_row() const { return outer_per_cos_row_; }
  int64_t dy_row(int64_t c, int64_t m) const { return decode(cos_axes_, c) + decode(broadcast_axes_, m); }
  // The dy rows m in [begin, end) of a cos row, as runs of rows that follow each other in memory:
  // (offset of the run's first row from dy_row(c, 0), in rows; rows in the run), the same for
  // every cos row c.
  std::vector<std::pair<int64_t, int64_t>> runs(int64_t begin, int64_t end) const;

 private:
  struct Axis {
    int64_t size;
    int64_t dy_stride;  // in rows
  };
  static int64_t decode(const std::vector<Axis>& axes, int64_t index);

  std::vector<Axis> cos_axes_, broadcast_axes_;
  int64_t cos_rows_ = 1, per_cos_row_ = 1, outer_per_cos_row_ = 1;
};

// One cos row's cos and sin in pair order (the order of the row loops' loads; see load_pairs),
// and for the grad with x its dcos / dsin sums, all float32: a view into a task's buffer.
struct PairRow {
  float* data;
  int64_t pairs;

  float* cos_a() const { return data; }
  float* cos_b() const { return data + pairs; }
  float* sin_a() const { return data + 2 * pairs; }
  float* sin_b() const { return data + 3 * pairs; }
  float* dcos_a() const { return data + 4 * pairs; }
  float* dcos_b() const { return data + 5 * pairs; }
  float* dsin_a() const { return data + 6 * pairs; }
  float* dsin_b() const { return data + 7 * pairs; }
};

// Work split for a family kernel: cos rows in `groups` ranges, and each cos row's dy rows in
// `chunks` ranges, enough of them to keep threads busy when cos rows are few. With `sums` (dcos
// and dsin), each chunk's partial sums are added in chunk order, so chunks are no more than the
// threads need: partial sums for every cos row would be written and read back again, up to half
// the traffic of the rows themselves. Without, chunks also follow the outer broadcast axes, so
// that a task walks memory in one stream. Depends only on the shape.
struct RotaryPositionEmbeddingSplit {
  int64_t groups, chunks;

  RotaryPositionEmbeddingSplit(const RotaryPositionEmbeddingRows& rows, bool sums);
  int64_t tasks() const { return groups * chunks; }
};

// How many cos rows a task takes at a time when each keeps `bytes_per_cos_row` of float32 tables:
// about 256 KiB of them, which stay in L2 while the task walks each run of its dy rows through
// the whole block. In BSND with a 1S1D table that streams through long stretches of each batch
// instead of hopping between batches at every position, and the longer those stretches the
// closer the hardware prefetchers bring a core to copy bandwidth (the grad with x measured 5-15%
// slower at 8 cos rows a block than at 64; the forward 1.4x faster in float32 and 1.5x in
// bfloat16 at 4x4096x32x128 than a cos row at a time).
int64_t cos_rows_per_block(int64_t bytes_per_cos_row);

// The task loop of both ops. Each task of `split` takes its cos rows a block at a time, their
// PairRows (`floats` floats each) in a buffer of its own, and walks each run of its dy rows
// through the whole block (see cos_rows_per_block). For a block: fill(c, pair_row) for each of its
// cos rows c, then rows(r, count, pair_row) for each run of `count` rows from element r, cos row by
// cos row, then done(chunk, c, pair_row) for each cos row. `stream`: the rows' stores stream.
template <class Fill, class RunRows, class Done>
void for_each_cos_block(const RotaryPositionEmbeddingRows& rows, const RotaryPositionEmbeddingSplit& split,
                        int64_t d, int64_t floats, bool stream, const Parallel& parallel, Fill&& fill,
                        RunRows&& run_rows, Done&& done) {
  const int64_t block = cos_rows_per_block(floats * static_cast<int64_t>(sizeof(float)));
  parallel.for_each(static_cast<size_t>(split.tasks()), [&](size_t task) {
    const int64_t group = static_cast<int64_t>(task) / split.chunks,
                  chunk = static_cast<int64_t>(task) % split.chunks;
    const auto runs = rows.runs(block_begin(chunk, split.chunks, rows.per_cos_row()),
                                block_begin(chunk + 1, split.chunks, rows.per_cos_row()));
    const int64_t c_begin = block_begin(group, split.groups, rows.cos_rows()),
                  c_end = block_begin(group + 1, split.groups, rows.cos_rows());
    // Left uninitialized: every block fills what it uses.
    const std::unique_ptr<float[]> data(new float[std::min(block, c_end - c_begin) * floats]);
    const auto pair_row = [&](int64_t j) { return PairRow{data.get() + j * floats, d / 2}; };
    for (int64_t c0 = c_begin; c0 < c_end; c0 += block) {
      const int64_t n = std::min(block, c_end - c0);
      for (int64_t j = 0; j < n; ++j) fill(c0 + j, pair_row(j));
      for (const auto& [offset, count] : runs) {
        for (int64_t j = 0; j < n; ++j) run_rows((rows.dy_row(c0 + j, 0) + offset) * d, count, pair_row(j));
      }
      for (int64_t j = 0; j < n; ++j) done(chunk, c0 + j, pair_row(j));
    }
    if (stream) _mm_sfence();  // streaming stores are weakly ordered: finish them before the join
  });
}

namespace {

// The AVX2 loops load and store 8 pairs at a time (see load8 and store8): from a split row (a's
// at row[a .. a + 8), b's at row[a + offset ..)) or from an interleaved row (elements 2p .. 2p +
// 16), as two vectors.
template <class T>
OAO_AVX2 void load_split(const T* row, int64_t a, int64_t offset, __m256& va, __m256& vb) {
  va = load8(row + a);
  vb = load8(row + a + offset);
}
template <bool kStream, class T>
OAO_AVX2 void store_split(T* row, int64_t a, int64_t offset, __m256 va, __m256 vb) {
  store8<kStream>(row + a, va);
  store8<kStream>(row + a + offset, vb);
}

// Evens and odds of 16 consecutive floats, each in order.
OAO_AVX2 void deinterleave(__m256 lo, __m256 hi, __m256& evens, __m256& odds) {
  const __m256 e = _mm256_shuffle_ps(lo, hi, 0x88), o = _mm256_shuffle_ps(lo, hi, 0xDD);
  evens = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
  odds = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8));
}
OAO_AVX2 void interleave(__m256 evens, __m256 odds, __m256& lo, __m256& hi) {
  const __m256 l = _mm256_unpacklo_ps(evens, odds), h = _mm256_unpackhi_ps(evens, odds);
  lo = _mm256_permute2f128_ps(l, h, 0x20);
  hi = _mm256_permute2f128_ps(l, h, 0x31);
}

template <class T>
OAO_AVX2 void load_interleaved(const T* row, int64_t p, __m256& va, __m256& vb) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    load16(row + 2 * p, va, vb);  // bfloat16's load16 already splits evens from odds
  } else {
    deinterleave(load8(row + 2 * p), load8(row + 2 * p + 8), va, vb);
  }
}
template <bool kStream, class T>
OAO_AVX2 void store_interleaved(T* row, int64_t p, __m256 va, __m256 vb) {
  if constexpr (std::is_same_v<T, bfloat16>) {
    store16<kStream>(row + 2 * p, va, vb);
  } else {
    __m256 lo, hi;
    interleave(va, vb, lo, hi);
    store8<kStream>(row + 2 * p, lo);
    store8<kStream>(row + 2 * p + 8, hi);
  }
}

// How the AVX2 loops take pairs from a row: split into runs of a's and b's, 8 pairs a vector;
// interleaved; or, for bfloat16, split with 16 pairs as two vectors in lane order (even pairs, then
// odd ones: see load16), which widens and narrows with half the instructions of 8 at a time (the
// bfloat16 loops run close to the memory's pace, so their instruction count shows). The float
// tables of cos and sin hold pairs in the order the row's loads give them (see load_pairs).
enum class Layout { kSplit, kInterleaved, kSplitLanes };

template <Layout kLayout>
inline constexpr int kVectors = kLayout == Layout::kSplitLanes ? 2 : 1;

// Pairs j .. j + 8 kVectors of the run of offset() pairs whose first a is at `row`: their a's
// follow each other in a split row (their b's `offset` later), the pairs themselves in an
// interleaved one.
template <Layout kLayout, class T>
OAO_AVX2 void load_run(const T* row, int64_t offset, int64_t j, __m256* va, __m256* vb) {
  if constexpr (kLayout == Layout::kSplit) {
    load_split(row, j, offset, va[0], vb[0]);
  } else if constexpr (kLayout == Layout::kInterleaved) {
    load_interleaved(row, j, va[0], vb[0]);
  } else {
    load16(row + j, va[0], va[1]);
    load16(row + j + offset, vb[0], vb[1]);
  }
}
template <Layout kLayout, bool kStream, class T>
OAO_AVX2 void store_run(T* row, int64_t offset, int64_t j, const __m256* va, const __m256* vb) {
  if constexpr (kLayout == Layout::kSplit) {
    store_split<kStream>(row, j, offset, va[0], vb[0]);
  } else if constexpr (kLayout == Layout::kInterleaved) {
    store_interleaved<kStream>(row, j, va[0], vb[0]);
  } else {
    store16<kStream>(row + j, va[0], va[1]);
    store16<kStream>(row + j + offset, vb[0], vb[1]);
  }
}

// The AVX2 loops take a run's pairs 8 kVectors at a time up to vector_pairs, and the last few (a
// run of 36 pairs at head dim 72) one by one, at these positions from the run's first a.
template <Layout kLayout>
int64_t vector_pairs(int64_t offset) {
  return offset - offset % (8 * kVectors<kLayout>);
}
template <Layout kLayout>
int64_t run_a(int64_t q) {
  return kLayout == Layout::kInterleaved ? 2 * q : q;
}
template <Layout kLayout>
int64_t run_b(int64_t q, int64_t offset) {
  return kLayout == Layout::kInterleaved ? 2 * q + 1 : q + offset;
}

// A cos or sin row into float32 pair order: a's into a[], b's into b[] (load_pairs).
template <class T>
void load_pairs_baseline(const PairPositions& pos, const T* row, float* a, float* b) {
  for (int64_t p = 0; p < pos.d / 2; ++p) {
    a[p] = to_float(row[pos.a(p)]);
    b[p] = to_float(row[pos.b(p)]);
  }
}
template <Layout kLayout, class T>
OAO_AVX2_TARGET void load_pairs_avx2(const PairPositions& pos, const T* row, float* a, float* b) {
  constexpr int kV = kVectors<kLayout>;
  const int64_t offset = pos.offset();
  const int64_t vec = vector_pairs<kLayout>(offset);
  for (int64_t run = 0; run < pos.d / 2; run += offset) {
    const T* base = row + pos.a(run);
    for (int64_t j = 0; j < vec; j += 8 * kV) {
      __m256 va[kV], vb[kV];
      load_run<kLayout>(base, offset, j, va, vb);
      for (int v = 0; v < kV; ++v) {
        _mm256_storeu_ps(a + run + j + 8 * v, va[v]);
        _mm256_storeu_ps(b + run + j + 8 * v, vb[v]);
      }
    }
    for (int64_t q = vec; q < offset; ++q) {
      a[run + q] = to_float(base[run_a<kLayout>(q)]);
      b[run + q] = to_float(base[run_b<kLayout>(q, offset)]);
    }
  }
}

// Whether a loop that reads rows in layout kIn and writes rows in kOut may walk each run from its
// last pairs down where the output runs ahead of an input (see store_runs_ahead), so that a step's
// loads never wait behind the step before's stores. Measured at 1x4096x32x128, one thread, NumPy
// inputs (16 bytes into a page) and an ORT output (64): going down was 1.15-1.4x faster with split
// inputs, 1.5x with 16-bit types in mode 1, but 2-3x slower for float32 reading interleaved rows
// and 1.1x slower for bfloat16 reading interleaved rows into split ones, which stay ascending.
template <Layout kIn, Layout kOut, class T>
inline constexpr bool kMayDescend =
    kIn != Layout::kInterleaved || (sizeof(T) == 2 && kOut == Layout::kInterleaved);

// The layouts the AVX2 loops take dy (or y; cos and sin follow it) and x (or dx) in, passed to
// `visit` as two std::integral_constant<Layout, ...>: dy is split except in mode 1, x is split in
// modes 0 and 2, and bfloat16 takes split rows 16 pairs at a time where a run holds whole 16s.
template <class T, class Visit>
auto visit_layouts(const PairPositions& pos, Visit&& visit) {
  using Split = std::integral_constant<Layout, Layout::kSplit>;
  using Interleaved = std::integral_constant<Layout, Layout::kInterleaved>;
  using SplitLanes = std::integral_constant<Layout, Layout::kSplitLanes>;
  switch (pos.mode) {
    case RotaryPositionEmbeddingMode::kHalf:
    case RotaryPositionEmbeddingMode::kQuarter:
      if (std::is_same_v<T, bfloat16> && pos.offset() % 16 == 0) return visit(SplitLanes{}, SplitLanes{});
      return visit(Split{}, Split{});
    case RotaryPositionEmbeddingMode::kInterleave:
      return visit(Interleaved{}, Interleaved{});
    case RotaryPositionEmbeddingMode::kInterleaveHalf:
      break;
  }
  return visit(Split{}, Interleaved{});
}

}  // namespace
}  // namespace oao
