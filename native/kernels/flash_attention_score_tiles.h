// What FlashAttentionScore and its grad share: where a row of each tensor sits in its layout, which
// keys a query row may read (sparse_mode, band, mask), the fixed tile sizes and blocks, float32 tiles
// of 16-bit rows, strided GEMM, and one exponential with the same bits on every ISA path.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/element.h"
#include "kernels/gemm.h"
#include "kernels/lightning_indexer_rows.h"
#include "kernels/row.h"

namespace oao {

// Element strides of a tensor's batch, head and row axes (its last axis, the head dim, is
// contiguous in every layout). In TND `batch` is 0: batch b's rows start at its span's begin.
struct FaStrides {
  int64_t batch = 0, head = 0, row = 0;
};

// One call's shapes as the kernels read them, from the layout and the attributes; the glue
// computes it (ort/flash_attention_score_signatures.h), so the kernels copy or transpose nothing whole.
struct FlashAttentionGeometry {
  // Cumulative query and key row ends per batch (BSND..SBH: S1 and S2 each, the same for all).
  TokenSpans spans;
  bool packed = false;  // TND: rows of all batches are one axis
  int64_t n1 = 0, n2 = 0, d = 0, dv = 0;
  // query, key and value; out for attention_out (and dy, attention_in: its shape); stats for
  // softmax_max/sum, whose 8 values of a row are contiguous; mask for atten_mask ([S1, S2] rows).
  FaStrides query, key, value, out, stats, mask;
  int sparse_mode = 0;
  bool masked = false;  // atten_mask given (sparse_mode 0 only): the band applies too
  int64_t pre_tokens = 0, next_tokens = 0;
  float scale = 1.f;

  int64_t batches() const { return static_cast<int64_t>(spans.query_end.size()); }
  int64_t query_rows(int64_t b) const { return spans.query_end[b] - spans.query_begin(b); }
  int64_t key_rows(int64_t b) const { return spans.key_end[b] - spans.key_begin(b); }
  int64_t group() const { return n1 / n2; }  // query heads per key/value head
  // Element offset of row s (counted in its batch) of head h in batch b, in a query-side tensor
  // (query, out, stats) or a key-side one (key, value).
  int64_t query_at(const FaStrides& t, int64_t b, int64_t h, int64_t s) const {
    return b * t.batch + ((packed ? spans.query_begin(b) : 0) + s) * t.row + h * t.head;
  }
  int64_t key_at(const FaStrides& t, int64_t b, int64_t h, int64_t s) const {
    return b * t.batch + ((packed ? spans.key_begin(b) : 0) + s) * t.row + h * t.head;
  }
  int64_t mask_at(int64_t b, int64_t h, int64_t s) const {
    return b * mask.batch + h * mask.head + s * mask.row;
  }
};

// Tile sizes: query rows per head and keys per block. Fixed, so that the online softmax's blocks,
// and with them every result's bits, depend on the problem only.
constexpr int64_t kFaQueryBlock = 64;
constexpr int64_t kFaKeyBlock = 256;
// Query rows (heads x rows) one task stacks into its tiles at most.
constexpr int64_t kFaTaskRows = 256;

// Rows [begin, end).
struct FaRange {
  int64_t begin = 0, end = 0;
  bool empty() const { return begin >= end; }
};

// The keys of batch b that query row q may read by sparse_mode and the band (the mask aside): one
// range, whose ends never decrease with q.
FaRange fa_row_keys(const FlashAttentionGeometry& g, int64_t b, int64_t q);
// The keys any of the query rows `rows` may read: the union of their ranges.
FaRange fa_block_keys(const FlashAttentionGeometry& g, int64_t b, FaRange rows);
// The query rows that may read any of the keys `keys`, by the same rules.
FaRange fa_block_queries(const FlashAttentionGeometry& g, int64_t b, FaRange keys);

// Scores row[0, n) of query row q, head h, batch b against keys [k0, k0 + n): -inf where the key
// is outside fa_row_keys or atten_mask (mask, may be null) is nonzero. Returns the row's largest
// score left (-inf when none is).
float fa_mask_row(const FlashAttentionGeometry& g, const uint8_t* mask, int64_t b, int64_t h, int64_t q,
                  int64_t k0, int64_t n, float* row);

// exp(x), the same bits on the AVX2 and plain paths (a Cephes-style polynomial, within 2 ulp):
// 0 below about -87.7 (and for -inf), NaN for NaN.
float fa_exp(float x);
// row[j] = fa_exp(row[j] - max) for j in [0, n), returning their sum, added in one fixed order on
// both paths; -inf scores give 0.
float fa_exp_row(float* row, int64_t n, float max);
// row[0, n) *= factor.
void fa_scale_row(float* row, int64_t n, float factor);

// Task tiles of one call: the tasks' query rows (heads [head_begin, head_end), all of one key/value
// head's group, rows `rows` of batch b), at most kFaTaskRows rows in all, on fixed boundaries.
struct FaQueryTask {
  int64_t batch, kv_head, head_begin, head_end;
  FaRange rows;
};
std::vector<FaQueryTask> fa_query_tasks(const FlashAttentionGeometry& g);

// Whether the attention kernels multiply T's operands on the CPU's bfloat16 dot products
// (gemm_bf16) instead of float32 copies: bfloat16 with AVX-512 BF16.
template <class T>
bool fa_dot_products() {
  return std::is_same_v<T, bfloat16> && use_avx512_bf16();
}

// A float32 view of `rows` rows of `cols` elements `stride` apart: the rows themselves for float32,
// else converted into `buffer` (then `cols` apart). The pointer and its leading dimension.
struct FaRows {
  const float* data;
  int64_t ld;
};
template <class T>
FaRows fa_rows(const T* src, int64_t stride, int64_t rows, int64_t cols, std::vector<float>& buffer);
// The same rows converted to float32 at dst (cols apart), for tiles the kernel writes to.
template <class T>
void fa_load_rows(const T* src, int64_t stride, int64_t rows, int64_t cols, float* dst);
// x[0, count) rounded to bfloat16 and back for bfloat16 inputs: P and dS enter their products
// rounded on every path (the dot products' and the float32 copies'), as the vendor's cube and
// torch's kernels multiply them. Nothing for float32, nor float16, whose dS would lose its small
// values.
template <class T>
void fa_round_to(float* x, int64_t count);

}  // namespace oao
