// The bfloat16 GEMM of the kernels whose products read two bfloat16 operands (GroupedMatmul and
// its weight gradient, the attention backward's scores and dP): float32 out, every product exact
// and summed in float32, as `gemm` does with the operands widened.
#pragma once

#include <cstdint>

#include "kernels/element.h"

namespace oao {

// C[m x n] = alpha op(A) op(B) + beta C, A and B bfloat16, C float32, row-major with leading
// dimensions, on the calling thread; beta 0 does not read C. With AVX-512 BF16 (use_avx512_bf16)
// it runs the CPU's bfloat16 dot products on operands packed in pairs along k, which flush
// subnormal inputs and sums to zero; otherwise it widens the operands to float32, 512 deep at a time, and calls `gemm`.
// The sums' order is fixed by the shapes alone on either path.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const bfloat16* a,
               int64_t lda, const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace oao
