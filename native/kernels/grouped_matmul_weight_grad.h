// GroupedMatmulWeightGrad: per group, its rows of x and of dy multiplied and summed over the rows.
#pragma once

#include "kernels/grouped_matmul_groups.h"
#include "kernels/parallel.h"

namespace oao {

// dweight[g] = x[rows of g]^T @ dy[rows of g] ([k, n]), or dy^T @ x ([n, k]) with
// transpose_weight; zeros for a group with no rows. Summed in float32 over fixed chunks of rows and
// rounded to T once. T: float, half, bfloat16.
template <class T>
void grouped_matmul_weight_grad(const T* x, const T* dy, T* dweight, const GroupedMatmulShape& s,
                                const Parallel& parallel);

}  // namespace oao
