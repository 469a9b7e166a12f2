// Run by tests/test_write_order.py: records the order in which the norm kernels first write each
// 4 KiB page of their output, with the inputs and the output forced to given page offsets, and
// checks that rows are written one at a time (each row's first writes to its pages come together).
// Streaming stores to two rows in turn measured 1.4-2.2x slower where rows share a page offset
// (widths of a multiple of 4 KiB); this proves the kernels never do it, without timing anything.
//
// Usage: write_order; prints one line per case and exits 1 if any case writes rows in turn.
#include <signal.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/element.h"
#include "kernels/rms_norm.h"
#include "kernels/rms_norm_grad.h"

namespace {

constexpr size_t kPage = 4096;
// Outputs of 8 MiB and more take the streaming stores (see use_streaming in kernels/vec.h).
constexpr size_t kOutputBytes = size_t(9) << 20;

char* g_watch_begin = nullptr;
char* g_watch_end = nullptr;
uintptr_t* g_faults = nullptr;  // first-write addresses, in order
size_t g_fault_count = 0;

// A write to a protected page of the watched output: note where, and let the write through.
void on_fault(int, siginfo_t* info, void*) {
  char* at = static_cast<char*>(info->si_addr);
  if (at < g_watch_begin || at >= g_watch_end) {
    signal(SIGSEGV, SIG_DFL);  // a real fault: crash as usual when the store is retried
    return;
  }
  g_faults[g_fault_count++] = reinterpret_cast<uintptr_t>(at);
  char* page = g_watch_begin + (at - g_watch_begin) / kPage * kPage;
  mprotect(page, kPage, PROT_READ | PROT_WRITE);
}

// `bytes` that start `offset` bytes into a page, in a page-aligned mapping of their own.
struct Placed {
  char* map;
  size_t map_bytes;
  char* data;

  Placed(size_t bytes, size_t offset) : map_bytes((bytes + offset) / kPage * kPage + kPage) {
    map = static_cast<char*>(
        mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    data = map + offset;
  }
  Placed(const Placed&) = delete;
  ~Placed() { munmap(map, map_bytes); }
};

// Runs `kernel(inputs, out, rows, cols)` on rows of `cols` elements of T filling about
// kOutputBytes, with the output's pages write-protected, and returns false if some row's first
// writes are split by another row's.
template <class T, class Kernel>
bool rows_written_one_at_a_time(int64_t cols, const std::vector<Placed*>& inputs, const Placed& out,
                                Kernel kernel) {
  const int64_t rows = static_cast<int64_t>(kOutputBytes / (cols * sizeof(T)));
  for (const Placed* p : inputs) {
    T* data = reinterpret_cast<T*>(p->data);
    for (int64_t k = 0; k < rows * cols; ++k) data[k] = oao::from_float<T>(1.f);
  }
  std::vector<uintptr_t> faults(out.map_bytes / kPage + 1);
  g_faults = faults.data();
  g_fault_count = 0;
  g_watch_begin = out.map;
  g_watch_end = out.map + out.map_bytes;
  mprotect(out.map, out.map_bytes, PROT_READ);
  kernel(reinterpret_cast<T*>(out.data), rows);
  g_watch_begin = g_watch_end = nullptr;
  mprotect(out.map, out.map_bytes, PROT_READ | PROT_WRITE);

  // Rows whose pages were first written, in order: each row must appear in one stretch.
  std::vector<bool> finished(static_cast<size_t>(rows), false);
  int64_t current = -1;
  bool ok = g_fault_count > 0;
  for (size_t f = 0; f < g_fault_count; ++f) {
    const int64_t row =
        static_cast<int64_t>((g_faults[f] - reinterpret_cast<uintptr_t>(out.data)) / (cols * sizeof(T)));
    if (row == current) continue;
    if (current >= 0) finished[current] = true;
    if (row < 0 || row >= rows || finished[row]) ok = false;
    current = row;
  }
  return ok;
}

template <class T>
bool check_dtype(const char* dtype) {
  bool all = true;
  // ONNX Runtime's buffers start 64 bytes into a page, NumPy's 16; and two far apart.
  const size_t offsets[][2] = {{64, 64}, {16, 64}, {64, 16}, {0, 2048}, {48, 0}};
  for (const auto& [in_offset, out_offset] : offsets) {
    Placed a(kOutputBytes, in_offset), b(kOutputBytes, in_offset), out(kOutputBytes, out_offset);
    for (int64_t cols : {2048, 4096, 4160, 8192}) {
      std::vector<float> gamma(static_cast<size_t>(cols), 1.f), dgamma(static_cast<size_t>(cols));
      std::vector<float> rstd(kOutputBytes / (cols * sizeof(T)), 1.f);
      const T* x = reinterpret_cast<const T*>(a.data);
      const T* dy = reinterpret_cast<const T*>(b.data);
      const bool norm = rows_written_one_at_a_time<T>(cols, {&a}, out, [&](T* y, int64_t rows) {
        oao::rms_norm<T, float>(x, gamma.data(), 1e-6f, y, rstd.data(), rows, cols, oao::Parallel{});
      });
      const bool grad = rows_written_one_at_a_time<T>(cols, {&a, &b}, out, [&](T* dx, int64_t rows) {
        oao::rms_norm_grad<T, float>(dy, x, rstd.data(), gamma.data(), dx, dgamma.data(), rows, cols,
                                     oao::Parallel{});
      });
      std::printf("%s cols %lld inputs at %zu output at %zu: RmsNorm %s, RmsNormGrad %s\n", dtype,
                  static_cast<long long>(cols), in_offset, out_offset, norm ? "ok" : "ROWS IN TURN",
                  grad ? "ok" : "ROWS IN TURN");
      all = all && norm && grad;
    }
  }
  return all;
}

}  // namespace

int main() {
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &action, nullptr);
  bool ok = check_dtype<float>("float32");
  ok = check_dtype<oao::bfloat16>("bfloat16") && ok;
  ok = check_dtype<oao::half>("float16") && ok;
  return ok ? 0 : 1;
}
