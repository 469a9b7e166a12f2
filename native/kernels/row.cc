#include "kernels/row.h"

#include <cstdlib>
#include <cstring>

namespace oao {

namespace {

bool isa_capped_at(const char* level) {
  const char* isa = std::getenv("ORT_ASCEND_OPS_ISA");
  return isa != nullptr && std::strcmp(isa, level) == 0;
}

}  // namespace

bool use_avx2() {
  static const bool avx2 = [] {
    if (isa_capped_at("baseline")) return false;
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    return false;
#endif
  }();
  return avx2;
}

bool use_avx512() {
  static const bool avx512 = [] {
    if (!use_avx2() || isa_capped_at("avx2")) return false;
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    return false;
#endif
  }();
  return avx512;
}

bool use_avx512_bf16() {
#if defined(__x86_64__)
  static const bool bf16 = use_avx512() && __builtin_cpu_supports("avx512bf16");
  return bf16;
#else
  return false;
#endif
}

void sum_partials(const float* partial, size_t blocks, int64_t cols, int64_t begin, int64_t end, float* out) {
  for (int64_t j = begin; j < end; ++j) out[j] = 0.f;
  for (size_t b = 0; b < blocks; ++b) {
    const float* p = partial + b * cols;
    for (int64_t j = begin; j < end; ++j) out[j] += p[j];
  }
}

}  // namespace oao
