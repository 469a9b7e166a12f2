// The float32 GEMM every GEMM-shaped kernel calls: OpenBLAS (scipy-openblas32), one call per task
// on the task's thread.
#pragma once

#include <cstdint>

namespace oao {

// C[m x n] = alpha op(A) op(B) + beta C, float32, row-major with leading dimensions, on the
// calling thread (see single_threaded_blas). k = 0 scales C by beta (0: zeros).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same on packed matrices (each leading dimension its row's width): C = op(A) op(B), or C +=
// with accumulate.
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                 float* c, bool accumulate = false) {
  gemm(trans_a, trans_b, m, n, k, 1.f, a, trans_a ? m : k, b, trans_b ? k : n, accumulate ? 1.f : 0.f, c, n);
}

// Keeps OpenBLAS on the calling thread: the kernels already spread their tasks over ORT's threads.
void single_threaded_blas();

}  // namespace oao
