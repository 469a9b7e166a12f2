// The vendor's first phases of the elementwise aclnn functions the standard ops call (signatures
// from the aclnn pages, as acl_abi.h's).
#pragma once

#include "aclnn/acl_abi.h"

namespace oao::acl {

// aclnnAdd, aclnnSub: out = self + alpha * other (self - alpha * other).
using AlphaBinaryPrepare = aclnnStatus (*)(const aclTensor* self, const aclTensor* other,
                                           const aclScalar* alpha, const aclTensor* out,
                                           uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnMul, aclnnDiv, aclnnMaximum, aclnnMinimum, aclnnPowTensorTensor, aclnnEqTensor, aclnnNeTensor,
// aclnnLtTensor, aclnnLeTensor, aclnnGtTensor, aclnnGeTensor, aclnnLogicalAnd, aclnnLogicalOr,
// aclnnLogicalXor, aclnnRemainderTensorTensor (floor: the divisor's sign), aclnnFmodTensor (C's fmod:
// the dividend's sign).
using BinaryPrepare = aclnnStatus (*)(const aclTensor* self, const aclTensor* other, const aclTensor* out,
                                      uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnDivMod: mode 0 true division, 1 toward zero (ONNX's integer Div), 2 floor.
using DivModPrepare = aclnnStatus (*)(const aclTensor* self, const aclTensor* other, int mode,
                                      const aclTensor* out, uint64_t* workspace_size,
                                      aclOpExecutor** executor);
// aclnnNeg, aclnnExp, aclnnLog, aclnnSqrt, aclnnRsqrt, aclnnReciprocal, aclnnSigmoid, aclnnTanh, aclnnSin,
// aclnnCos, aclnnAbs, aclnnRelu, aclnnErf, aclnnFloor, aclnnCeil, aclnnSign, aclnnLogicalNot.
using UnaryPrepare = aclnnStatus (*)(const aclTensor* self, const aclTensor* out, uint64_t* workspace_size,
                                     aclOpExecutor** executor);
// aclnnSWhere: out = condition ? self : other.
using WherePrepare = aclnnStatus (*)(const aclTensor* condition, const aclTensor* self,
                                     const aclTensor* other, const aclTensor* out, uint64_t* workspace_size,
                                     aclOpExecutor** executor);
// aclnnGeluV2: approximate 0 is x * Phi(x) (erf), 1 its tanh approximation.
using GeluV2Prepare = aclnnStatus (*)(const aclTensor* x, int64_t approximate, const aclTensor* y,
                                      uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnCast.
using CastPrepare = aclnnStatus (*)(const aclTensor* self, aclDataType dtype, const aclTensor* out,
                                    uint64_t* workspace_size, aclOpExecutor** executor);

}  // namespace oao::acl
