#include "kernels/row.h"

#include <cstdlib>
#include <cstring>

namespace oao {

bool use_avx2() {
  static const bool avx2 = [] {
    const char* isa = std::getenv("ORT_ASCEND_OPS_ISA");
    if (isa != nullptr && std::strcmp(isa, "baseline") == 0) return false;
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    return false;
#endif
  }();
  return avx2;
}

void sum_partials(const float* partial, size_t blocks, int64_t cols, int64_t begin, int64_t end, float* out) {
  for (int64_t j = begin; j < end; ++j) out[j] = 0.f;
  for (size_t b = 0; b < blocks; ++b) {
    const float* p = partial + b * cols;
    for (int64_t j = begin; j < end; ++j) out[j] += p[j];
  }
}

}  // namespace oao
