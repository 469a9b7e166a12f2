#include "kernels/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <mutex>

namespace oao {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
        int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum; BLAS would also refuse the leading dimension 0
    for (int64_t i = 0; i < m; ++i) {
      if (beta == 0.f) {
        std::fill(c + i * ldc, c + i * ldc + n, 0.f);
      } else {
        for (int64_t j = 0; j < n; ++j) c[i * ldc + j] *= beta;
      }
    }
    return;
  }
  scipy_cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                    static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                    static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                    static_cast<blasint>(ldc));
}

void single_threaded_blas() {
  // This OpenBLAS is the scipy-openblas32 wheel's, ours alone in the process (NumPy carries its
  // own), so its global thread count is ours to set; its wheel does not export the per-thread one.
  static std::once_flag once;
  std::call_once(once, [] { scipy_openblas_set_num_threads(1); });
}

}  // namespace oao
