// The vendor's first phases of the aclnn functions the matmul (MatMul, Gemm) and softmax families call
// (signatures from the aclnn pages, as acl_abi.h's).
#pragma once

#include "aclnn/acl_abi.h"

namespace oao::acl {

// aclnnMatmul: self @ mat2 with numpy's rules (1 to 6 axes each, batch axes broadcast).
// cubeMathType 0 (KEEP_DTYPE) multiplies in the inputs' type, float32 included, on A2/A3.
using MatmulPrepare = aclnnStatus (*)(const aclTensor* self, const aclTensor* mat2, const aclTensor* out,
                                      int8_t cube_math_type, uint64_t* workspace_size,
                                      aclOpExecutor** executor);
inline constexpr int8_t kKeepDtype = 0;

// aclnnAddmm: out = beta * self + alpha * (mat1 @ mat2); mat1 [m, k], mat2 [k, n] (either may be a
// strided view), self broadcastable to [m, n].
using AddmmPrepare = aclnnStatus (*)(const aclTensor* self, const aclTensor* mat1, const aclTensor* mat2,
                                     const aclScalar* beta, const aclScalar* alpha, const aclTensor* out,
                                     int8_t cube_math_type, uint64_t* workspace_size,
                                     aclOpExecutor** executor);

// aclnnMuls: out = self * other (a host scalar).
using MulsPrepare = aclnnStatus (*)(const aclTensor* self, const aclScalar* other, const aclTensor* out,
                                    uint64_t* workspace_size, aclOpExecutor** executor);

// aclnnSoftmax, aclnnLogSoftmax: along `dim` (counted from the end when negative).
using SoftmaxPrepare = aclnnStatus (*)(const aclTensor* self, int64_t dim, const aclTensor* out,
                                       uint64_t* workspace_size, aclOpExecutor** executor);

// aclnnNLLLoss (self [N, C] or [C]) and aclnnNLLLoss2d (self [N, C, H, W]): reduction 0 none,
// 1 mean (over the weights of the targets not ignored), 2 sum; total_weight_out is written for
// 1 and 2.
using NllLossPrepare = aclnnStatus (*)(const aclTensor* self, const aclTensor* target,
                                       const aclTensor* weight, int64_t reduction, int64_t ignore_index,
                                       const aclTensor* out, const aclTensor* total_weight_out,
                                       uint64_t* workspace_size, aclOpExecutor** executor);

// aclnnInplaceOne: every element of self_ref set to 1.
using InplaceOnePrepare = aclnnStatus (*)(const aclTensor* self_ref, uint64_t* workspace_size,
                                          aclOpExecutor** executor);

}  // namespace oao::acl
