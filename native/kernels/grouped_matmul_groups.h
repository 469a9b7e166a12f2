// What GroupedMatmul and its weight gradient share: the rows of x sorted by group, and the fixed
// blocks their products are cut into (by the problem alone, so every result has the same bits on
// any number of threads).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace oao {

struct GroupedMatmulShape {
  int64_t m = 0, k = 0, n = 0;      // x [m, k]; y and dy [m, n]
  const int64_t* counts = nullptr;  // rows per group, non-negative, adding up to m (checked by the glue)
  int64_t groups = 0;
  bool transpose_weight = false;  // weight [groups, n, k] rather than [groups, k, n]
};

// One task's block: rows [row_begin, row_end) and columns [col_begin, col_end) of group `group`'s
// product.
struct GroupBlock {
  int64_t group, row_begin, row_end, col_begin, col_end;
};

// The blocks of rows [rows(g).first, rows(g).second) x `cols` columns per group g, at most
// `row_block` x `col_block` each.
template <class Rows>
std::vector<GroupBlock> group_blocks(int64_t groups, Rows rows, int64_t cols, int64_t row_block, int64_t col_block) {
  std::vector<GroupBlock> blocks;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = rows(g).first, end = rows(g).second;
    for (int64_t r = begin; r < end; r += row_block) {
      for (int64_t c = 0; c < cols; c += col_block)
        blocks.push_back({g, r, std::min(r + row_block, end), c, std::min(c + col_block, cols)});
    }
  }
  return blocks;
}

// Each group's first row: the sums of the counts before it.
inline std::vector<int64_t> group_starts(const GroupedMatmulShape& s) {
  std::vector<int64_t> starts(static_cast<size_t>(s.groups) + 1, 0);
  for (int64_t g = 0; g < s.groups; ++g) starts[g + 1] = starts[g] + s.counts[g];
  return starts;
}

}  // namespace oao
