#include "kernels/grouped_matmul.h"

#include <type_traits>

#include "kernels/element.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/lightning_indexer_rows.h"

namespace oao {
namespace {

// Rows and columns of y per task: large enough for sgemm's own blocking, small enough that a
// few experts' rows still make work for every thread.
constexpr int64_t kRowBlock = 256, kColBlock = 512;

}  // namespace

template <class T>
void grouped_matmul(const T* x, const T* weight, T* y, const GroupedMatmulShape& s, const Parallel& parallel) {
  single_threaded_blas();
  const std::vector<int64_t> starts = group_starts(s);
  const auto rows = [&](int64_t g) { return std::pair{starts[g], starts[g + 1]}; };
  const std::vector<GroupBlock> blocks = group_blocks(s.groups, rows, s.n, kRowBlock, kColBlock);
  const int64_t k = s.k, n = s.n;
  const bool tw = s.transpose_weight;
  parallel.for_each(blocks.size(), [&](size_t i) {
    const GroupBlock& b = blocks[i];
    const int64_t m_b = b.row_end - b.row_begin, n_b = b.col_end - b.col_begin;
    const T* w = weight + b.group * k * n + (tw ? b.col_begin * k : b.col_begin);  // W_g's first column
    T* out = y + b.row_begin * n + b.col_begin;
    if constexpr (std::is_same_v<T, float>) {
      gemm(false, tw, m_b, n_b, k, 1.f, x + b.row_begin * k, k, w, tw ? k : n, 0.f, out, n);
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      std::vector<float> c(static_cast<size_t>(m_b * n_b));
      gemm_bf16(false, tw, m_b, n_b, k, 1.f, x + b.row_begin * k, k, w, tw ? k : n, 0.f, c.data(), n_b);
      for (int64_t r = 0; r < m_b; ++r) from_float32(c.data() + r * n_b, n_b, out + r * n);
    } else {
      // The block's operands in float32: its rows of x, its columns of W_g (as stored), its output.
      std::vector<float> a(static_cast<size_t>(m_b * k)), w32(static_cast<size_t>(k * n_b)),
          c(static_cast<size_t>(m_b * n_b));
      to_float32(x + b.row_begin * k, m_b * k, a.data());
      if (tw) {
        to_float32(w, n_b * k, w32.data());
      } else {
        for (int64_t r = 0; r < k; ++r) to_float32(w + r * n, n_b, w32.data() + r * n_b);
      }
      gemm(false, tw, m_b, n_b, k, 1.f, a.data(), k, w32.data(), tw ? k : n_b, 0.f, c.data(), n_b);
      for (int64_t r = 0; r < m_b; ++r) from_float32(c.data() + r * n_b, n_b, out + r * n);
    }
  });
}

template void grouped_matmul<float>(const float*, const float*, float*, const GroupedMatmulShape&,
                                    const Parallel&);
template void grouped_matmul<half>(const half*, const half*, half*, const GroupedMatmulShape&, const Parallel&);
template void grouped_matmul<bfloat16>(const bfloat16*, const bfloat16*, bfloat16*, const GroupedMatmulShape&,
                                       const Parallel&);

}  // namespace oao
