// How a kernel spreads work over threads without knowing who owns them: ONNX Runtime's intra-op
// pool through the glue, or nothing (serial) when a test or another runtime calls the kernel.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <type_traits>

namespace oao {

// The indices of one Parallel::for_each, handed out one per call of `claim`: however many of its
// calls the pool makes, each index runs at most once, and whoever calls after the pool is done
// runs the rest. A body's exception is kept, never thrown into the pool (whose threads it would
// crash or leave waiting); once one is kept, the bodies not yet started are skipped.
template <class F>
class Claims {
 public:
  Claims(F& body, size_t total) : body_(body), total_(total) {}

  static void claim(void* claims, size_t) { static_cast<Claims*>(claims)->run_next(); }

  // Runs the next unclaimed index; false when none is left.
  bool run_next() {
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= total_) return false;
    if (failed_.load(std::memory_order_relaxed)) return true;
    try {
      body_(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
    return true;
  }

  // The first exception a body threw, on the calling thread.
  void rethrow() const {
    if (failure_) std::rethrow_exception(failure_);
  }

 private:
  F& body_;
  const size_t total_;
  std::atomic<size_t> next_{0};
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr failure_;
};

struct Parallel {
  using Task = void (*)(void* data, size_t index);
  // Calls task(data, i) for every i in [0, total) and returns when no call is running: true, or
  // false when the pool could not make them all (it may have made some, or none). Null: serial.
  bool (*run)(void* owner, Task task, size_t total, void* data) = nullptr;
  void* owner = nullptr;

  // Runs body(i) once for every i in [0, total). If a body throws, the first exception is
  // rethrown here once the others have returned, and the bodies not started by then never run.
  template <class F>
  void for_each(size_t total, F&& body) const {
    if (total == 0) return;
    if (run == nullptr || total == 1) {
      for (size_t i = 0; i < total; ++i) body(i);
      return;
    }
    Claims<std::remove_reference_t<F>> claims(body, total);
    if (!run(owner, &decltype(claims)::claim, total, &claims)) {
      while (claims.run_next()) {
      }
    }
    claims.rethrow();
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
