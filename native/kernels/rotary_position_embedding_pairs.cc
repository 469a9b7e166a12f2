#include "kernels/rotary_position_embedding_pairs.h"

#include <algorithm>

namespace oao {

RotaryPositionEmbeddingRows::RotaryPositionEmbeddingRows(const std::vector<int64_t>& dy_shape, const std::vector<int64_t>& cos_shape) {
  int64_t stride = 1;
  for (size_t i = dy_shape.size() - 1; i-- > 0;) {
    if (dy_shape[i] > 1) {
      auto& axes = cos_shape[i] == 1 ? broadcast_axes_ : cos_axes_;
      axes.insert(axes.begin(), Axis{dy_shape[i], stride});
    }
    stride *= dy_shape[i];
  }
  for (const Axis& axis : cos_axes_) cos_rows_ *= axis.size;
  for (const Axis& axis : broadcast_axes_) per_cos_row_ *= axis.size;
  const int64_t innermost_cos_stride = cos_axes_.empty() ? 0 : cos_axes_.back().dy_stride;
  for (const Axis& axis : broadcast_axes_) {
    if (axis.dy_stride > innermost_cos_stride) outer_per_cos_row_ *= axis.size;
  }
  // An empty leading axis leaves no rows at all.
  if (stride == 0) cos_rows_ = per_cos_row_ = outer_per_cos_row_ = 0;
}

int64_t RotaryPositionEmbeddingRows::decode(const std::vector<Axis>& axes, int64_t index) {
  int64_t row = 0;
  for (size_t i = axes.size(); i-- > 0;) {
    row += index % axes[i].size * axes[i].dy_stride;
    index /= axes[i].size;
  }
  return row;
}

std::vector<std::pair<int64_t, int64_t>> RotaryPositionEmbeddingRows::runs(int64_t begin, int64_t end) const {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t m = begin; m < end; ++m) {
    const int64_t offset = dy_row(0, m);
    if (!runs.empty() && runs.back().first + runs.back().second == offset) {
      ++runs.back().second;
    } else {
      runs.emplace_back(offset, 1);
    }
  }
  return runs;
}

RotaryPositionEmbeddingSplit::RotaryPositionEmbeddingSplit(const RotaryPositionEmbeddingRows& rows, bool sums) {
  constexpr int64_t kTasks = 64;
  groups = std::min(rows.cos_rows(), kTasks);
  const int64_t for_threads = groups == 0 ? 1 : (kTasks + groups - 1) / groups;
  chunks = std::max(for_threads, sums ? 1 : rows.outer_per_cos_row());
  chunks = std::max<int64_t>(1, std::min(rows.per_cos_row(), chunks));
}

int64_t cos_rows_per_block(int64_t bytes_per_cos_row) {
  constexpr int64_t kBlockBytes = 256 << 10;
  return std::max<int64_t>(1, kBlockBytes / std::max<int64_t>(1, bytes_per_cos_row));
}

}  // namespace oao
