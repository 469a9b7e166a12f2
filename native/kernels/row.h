// Pieces shared by the kernels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace oao {

// Whether the kernels take their AVX2 (+FMA, F16C) paths: decided once, from the CPU, unless the
// environment sets ORT_ASCEND_OPS_ISA=baseline, which forces the plain loops (so tests can cover
// them on any machine).
bool use_avx2();

// The one target of every AVX2 path, the features use_avx2() checks for: a function compiled for
// it is called only behind use_avx2(), so that the environment's choice holds in every kernel.
#define OAO_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

// out[j] = sum over b in [0, blocks) of partial[b * cols + j], for j in [begin, end), adding the
// blocks in index order.
void sum_partials(const float* partial, size_t blocks, int64_t cols, int64_t begin, int64_t end, float* out);

}  // namespace oao
