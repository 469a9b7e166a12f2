// HCCL as the graph's collective nodes use it (standard/collective.cc): the communicators the
// Python side made (src/ort_ascend_ops/training/api/hccl.py) are registered here by name, each with
// the stream its collectives run on, apart from the compute stream, so that a gradient bucket's
// all-reduce runs while the backward goes on, as torch_npu's HCCL process group overlaps its own.
#pragma once

#include <string>

#include "aclnn/hccl_abi.h"

namespace oao::hccl {

typedef void* aclrtEvent;

struct Group {
  HcclComm comm;
  aclrtStream stream;  // the communicator's own, which the host waits for after the run
  aclrtEvent ready;    // recorded on the compute stream before a collective, awaited by `stream`
};

// The group registered under `name`; throws std::runtime_error naming it when there is none.
Group group(const std::string& name);

}  // namespace oao::hccl
