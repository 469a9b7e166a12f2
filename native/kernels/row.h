// Pieces shared by the kernels.
#pragma once

#include <cstddef>
#include <cstdint>

namespace oao {

// Whether the kernels take their AVX2 (+FMA, F16C) paths, their AVX-512 ones (F, BW, VL, DQ) and
// their AVX-512 BF16 ones: decided once, from the CPU, unless the environment caps them, so that
// tests cover every path on any machine that has it: ORT_ASCEND_OPS_ISA=baseline forces the plain
// loops, ORT_ASCEND_OPS_ISA=avx2 leaves AVX-512 out.
bool use_avx2();
bool use_avx512();
bool use_avx512_bf16();

// The one target of every AVX2 path, the features use_avx2() checks for: a function compiled for
// it is called only behind use_avx2(), so that the environment's choice holds in every kernel.
#define OAO_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
// The same for the AVX-512 paths, behind use_avx512(), and the AVX-512 BF16 ones, behind
// use_avx512_bf16().
#define OAO_AVX512_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define OAO_AVX512_BF16_TARGET \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// Outputs at least this large are written with streaming stores where a kernel can: they would not
// stay in cache anyway, and streaming skips the read for ownership.
constexpr size_t kStreamingBytes = size_t(8) << 20;

// out[j] = sum over b in [0, blocks) of partial[b * cols + j], for j in [begin, end), adding the
// blocks in index order.
void sum_partials(const float* partial, size_t blocks, int64_t cols, int64_t begin, int64_t end, float* out);

}  // namespace oao
