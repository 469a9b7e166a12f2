// How a kernel spreads work over threads without knowing who owns them: ONNX Runtime's intra-op
// pool through the glue, or nothing (serial) when a test or another runtime calls the kernel.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace oao {

struct Parallel {
  using Task = void (*)(void* data, size_t index);
  // Runs task(data, i) for every i in [0, total) and returns when all are done. Null: serial.
  void (*run)(void* owner, Task task, size_t total, void* data) = nullptr;
  void* owner = nullptr;

  template <class F>
  void for_each(size_t total, F&& body) const {
    if (total == 0) return;
    if (run == nullptr || total == 1) {
      for (size_t i = 0; i < total; ++i) body(i);
      return;
    }
    run(owner, [](void* data, size_t i) { (*static_cast<F*>(data))(i); }, total, &body);
  }
};

// Rows are processed in blocks whose number depends only on the problem, never on the thread count,
// so per-block partial sums (and their fixed-order reduction) are the same however many threads
// run them. At most 64 blocks, and about 32K elements or more each, so that small problems do not
// pay for many partial sums and task switches.
inline size_t block_count(size_t rows, size_t row_elements) {
  constexpr size_t kMaxBlocks = 64, kMinBlockElements = size_t(1) << 15;
  const size_t by_work = rows * row_elements / kMinBlockElements;
  return std::min({rows, kMaxBlocks, std::max<size_t>(by_work, 1)});
}

// First row of block b when `rows` rows are split into `blocks` nearly equal blocks.
inline int64_t block_begin(size_t b, size_t blocks, int64_t rows) {
  return static_cast<int64_t>(b * static_cast<size_t>(rows) / blocks);
}

}  // namespace oao
