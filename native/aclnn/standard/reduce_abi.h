// The vendor's first phases of the reduction aclnn functions the standard ops call (signatures
// from the aclnn pages and the vendor's ops-math sources, as acl_abi.h's).
#pragma once

#include "aclnn/acl_abi.h"

namespace oao::acl {

// aclnnReduceSum, aclnnMean: out = sum (mean) of self over dims, computed as dtype (out's type).
using ReduceDtypePrepare = aclnnStatus (*)(const aclTensor* self, const aclIntArray* dims, bool keepDims,
                                           aclDataType dtype, const aclTensor* out, uint64_t* workspace_size,
                                           aclOpExecutor** executor);
// aclnnAmax, aclnnAmin: out = max (min) of self over dim.
using ReducePrepare = aclnnStatus (*)(const aclTensor* self, const aclIntArray* dim, bool keepDim,
                                      const aclTensor* out, uint64_t* workspace_size,
                                      aclOpExecutor** executor);
// aclnnNorm: out = (sum of |self|^p over dim)^(1/p), in self's type (ReduceL2: p = 2).
using NormPrepare = aclnnStatus (*)(const aclTensor* self, const aclScalar* p, const aclIntArray* dim,
                                    bool keepDim, const aclTensor* out, uint64_t* workspace_size,
                                    aclOpExecutor** executor);
// aclnnProdDim: out = product of self along dim, computed as dtype (out's type; self's may differ).
using ProdDimPrepare = aclnnStatus (*)(const aclTensor* self, int64_t dim, bool keepDim, aclDataType dtype,
                                       const aclTensor* out, uint64_t* workspace_size,
                                       aclOpExecutor** executor);
// aclnnCumsum: inclusive running sums along dim, computed as dtype (out's type).
using CumsumPrepare = aclnnStatus (*)(const aclTensor* self, int64_t dim, aclDataType dtype,
                                      const aclTensor* out, uint64_t* workspace_size,
                                      aclOpExecutor** executor);
// aclnnCumsumV2: running sums along dim; exclusive leaves each element out of its own sum, reverse
// runs from the end of the axis.
using CumsumV2Prepare = aclnnStatus (*)(const aclTensor* self, int64_t dim, bool exclusive, bool reverse,
                                        const aclTensor* out, uint64_t* workspace_size,
                                        aclOpExecutor** executor);
// aclnnArgMax: out (int32 or int64) = index of the maximum along dim.
using ArgMaxPrepare = aclnnStatus (*)(const aclTensor* self, int64_t dim, bool keepdim, const aclTensor* out,
                                      uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnTopk: the k largest (smallest) values along dim and their int64 indices.
using TopkPrepare = aclnnStatus (*)(const aclTensor* self, int64_t k, int64_t dim, bool largest, bool sorted,
                                    const aclTensor* values_out, const aclTensor* indices_out,
                                    uint64_t* workspace_size, aclOpExecutor** executor);

}  // namespace oao::acl
