// GroupedMatmul: the rows of x sorted by group, each group's rows times its weight.
#pragma once

#include "kernels/grouped_matmul_groups.h"
#include "kernels/parallel.h"

namespace oao {

// y[rows of g] = x[rows of g] @ W_g, W_g = weight[g] ([k, n]) or weight[g]^T ([n, k] stored), by
// OpenBLAS's sgemm in float32 and rounded to T once. T: float, half, bfloat16.
template <class T>
void grouped_matmul(const T* x, const T* weight, T* y, const GroupedMatmulShape& s, const Parallel& parallel);

}  // namespace oao
