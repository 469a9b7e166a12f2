#include "kernels/grouped_matmul_weight_grad.h"

#include <algorithm>
#include <type_traits>

#include "kernels/element.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/lightning_indexer_rows.h"

namespace oao {
namespace {

// Output rows and columns per task, and rows of x and dy converted to float32 per sgemm (float16),
// fixed so that the float32 sums are added in the same order on any number of threads.
constexpr int64_t kBlock = 256, kRowChunk = 512;

}  // namespace

template <class T>
void grouped_matmul_weight_grad(const T* x, const T* dy, T* dweight, const GroupedMatmulShape& s,
                                const Parallel& parallel) {
  single_threaded_blas();
  const std::vector<int64_t> starts = group_starts(s);
  // dweight[g] = left[rows]^T @ right[rows]: [p, q] = [k, n], or [n, k] with transpose_weight.
  const T* left = s.transpose_weight ? dy : x;
  const T* right = s.transpose_weight ? x : dy;
  const int64_t p = s.transpose_weight ? s.n : s.k, q = s.transpose_weight ? s.k : s.n;
  // Blocks of each group's [p, q] output, all of its rows summed in each.
  const auto all = [&](int64_t) { return std::pair<int64_t, int64_t>{0, p}; };
  const std::vector<GroupBlock> blocks = group_blocks(s.groups, all, q, kBlock, kBlock);
  parallel.for_each(blocks.size(), [&](size_t i) {
    const GroupBlock& b = blocks[i];
    const int64_t p_b = b.row_end - b.row_begin, q_b = b.col_end - b.col_begin;
    const int64_t first = starts[b.group], rows = starts[b.group + 1] - first;
    T* out = dweight + b.group * p * q + b.row_begin * q + b.col_begin;
    const T* l = left + first * p + b.row_begin;
    const T* r = right + first * q + b.col_begin;
    if constexpr (std::is_same_v<T, float>) {
      gemm(true, false, p_b, q_b, rows, 1.f, l, p, r, q, 0.f, out, q);
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      std::vector<float> acc(static_cast<size_t>(p_b * q_b));
      gemm_bf16(true, false, p_b, q_b, rows, 1.f, l, p, r, q, 0.f, acc.data(), q_b);
      for (int64_t j = 0; j < p_b; ++j) from_float32(acc.data() + j * q_b, q_b, out + j * q);
    } else {
      std::vector<float> acc(static_cast<size_t>(p_b * q_b), 0.f);
      const int64_t chunk = std::min(rows, kRowChunk);
      std::vector<float> l32(static_cast<size_t>(chunk * p_b)), r32(static_cast<size_t>(chunk * q_b));
      for (int64_t t0 = 0; t0 < rows; t0 += kRowChunk) {
        const int64_t t = std::min(kRowChunk, rows - t0);
        for (int64_t j = 0; j < t; ++j) {
          to_float32(l + (t0 + j) * p, p_b, l32.data() + j * p_b);
          to_float32(r + (t0 + j) * q, q_b, r32.data() + j * q_b);
        }
        gemm(true, false, p_b, q_b, t, 1.f, l32.data(), p_b, r32.data(), q_b, 1.f, acc.data(), q_b);
      }
      for (int64_t j = 0; j < p_b; ++j) from_float32(acc.data() + j * q_b, q_b, out + j * q);
    }
  });
}

template void grouped_matmul_weight_grad<float>(const float*, const float*, float*, const GroupedMatmulShape&,
                                                const Parallel&);
template void grouped_matmul_weight_grad<half>(const half*, const half*, half*, const GroupedMatmulShape&,
                                               const Parallel&);
template void grouped_matmul_weight_grad<bfloat16>(const bfloat16*, const bfloat16*, bfloat16*,
                                                   const GroupedMatmulShape&, const Parallel&);

}  // namespace oao
