// The vendor's first phases of the aclnn functions the layout standard ops call (signatures from the
// aclnn pages, as acl_abi.h's; outputs taken const as elementwise_abi.h's).
#pragma once

#include "aclnn/acl_abi.h"

namespace oao::acl {

// aclnnPermute (dims: a permutation of self's axes), aclnnExpand (size: the broadcast shape),
// aclnnRepeat (repeats: copies per axis), aclnnFlip (dims: the axes to reverse).
using IntArrayPrepare = aclnnStatus (*)(const aclTensor* self, const aclIntArray* dims, const aclTensor* out,
                                        uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnCat: tensors joined along dim.
using CatPrepare = aclnnStatus (*)(const aclTensorList* tensors, int64_t dim, const aclTensor* out,
                                   uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnSliceV2: starts, ends, axes and steps of equal length, steps positive.
using SliceV2Prepare = aclnnStatus (*)(const aclTensor* self, const aclIntArray* starts,
                                       const aclIntArray* ends, const aclIntArray* axes,
                                       const aclIntArray* steps, const aclTensor* out,
                                       uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnSplitWithSize: self cut along dim into pieces of splitSize, one output each.
using SplitWithSizePrepare = aclnnStatus (*)(const aclTensor* self, const aclIntArray* split_size,
                                             int64_t dim, const aclTensorList* out, uint64_t* workspace_size,
                                             aclOpExecutor** executor);
// aclnnConstantPadNd: pad in torch's order, the last axis's (begin, end) first.
using ConstantPadNdPrepare = aclnnStatus (*)(const aclTensor* self, const aclIntArray* pad,
                                             const aclScalar* value, const aclTensor* out,
                                             uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnTriu, aclnnTril: the last two axes' upper (lower) triangle from `diagonal` on, zeros elsewhere.
using TriangularPrepare = aclnnStatus (*)(const aclTensor* self, int64_t diagonal, const aclTensor* out,
                                          uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnArange: [start, end) by step into a 1-D out.
using ArangePrepare = aclnnStatus (*)(const aclScalar* start, const aclScalar* end, const aclScalar* step,
                                      const aclTensor* out, uint64_t* workspace_size,
                                      aclOpExecutor** executor);
// aclnnInplaceFillScalar: every element of selfRef set to value.
using InplaceFillScalarPrepare = aclnnStatus (*)(const aclTensor* self_ref, const aclScalar* value,
                                                 uint64_t* workspace_size, aclOpExecutor** executor);

}  // namespace oao::acl
