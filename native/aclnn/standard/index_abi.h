// The vendor's first phases of the gather and scatter aclnn functions the standard ops call
// (signatures from the aclnn pages, as acl_abi.h's; tensors the vendor writes are declared const
// here too, as elementwise_abi.h's outs).
#pragma once

#include "aclnn/acl_abi.h"

namespace oao::acl {

// aclnnGatherV2: out = self indexed along dim by index of any shape (a 0-d index counts as [1]);
// out's shape is self's with dim replaced by index's. Takes indices counted from the end.
// aclnnGather (torch.gather): out[i...] = self[i... with index[i...] at dim]; indices in [0, size).
using GatherDimPrepare = aclnnStatus (*)(const aclTensor* self, int64_t dim, const aclTensor* index,
                                         const aclTensor* out, uint64_t* workspace_size,
                                         aclOpExecutor** executor);
// aclnnGatherNd: slices of self at the index tuples along indices' last axis; negativeIndexSupport
// admits tuples counted from the end.
using GatherNdPrepare = aclnnStatus (*)(const aclTensor* self, const aclTensor* indices,
                                        bool negative_index_support, const aclTensor* out,
                                        uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnScatter (torch.scatter): out = self with src put at index along dim; reduce 0 replaces,
// 1 adds, 2 multiplies. Indices in [0, size).
using ScatterPrepare = aclnnStatus (*)(const aclTensor* self, int64_t dim, const aclTensor* index,
                                       const aclTensor* src, int64_t reduce, const aclTensor* out,
                                       uint64_t* workspace_size, aclOpExecutor** executor);
// aclnnIndexPutImpl (torch.index_put_): selfRef[indices[0], ..., indices[n-1]] = values (+= with
// accumulate), in place; unsafe asks for the range check of the indices.
using IndexPutImplPrepare = aclnnStatus (*)(const aclTensor* self_ref, const aclTensorList* indices,
                                            const aclTensor* values, bool accumulate, bool unsafe,
                                            uint64_t* workspace_size, aclOpExecutor** executor);

}  // namespace oao::acl
