// The slice of HCCL's C ABI (the vendor's collective library, libhccl.so) that data-parallel
// training uses, declared here because no CANN SDK is needed to build the package. Values from the
// vendor's hccl_types.h and hccl.h as published in github.com/Ascend/pytorch
// (third_party/hccl/inc/hccl/). As in acl_abi.h, functions are pointer types, not prototypes: a
// caller resolves them at run time.
#pragma once

#include <cstdint>

#include "aclnn/acl_abi.h"

extern "C" {

typedef void* HcclComm;

// The enums have int as their fixed underlying type (the vendor's C enums are int-sized): a value
// the vendor does not define is then an int a check can refuse, not undefined behaviour.

typedef enum : int {
  HCCL_SUCCESS = 0,
  HCCL_E_PARA = 1,
  HCCL_E_PTR = 2,
  HCCL_E_MEMORY = 3,
  HCCL_E_INTERNAL = 4,
  HCCL_E_NOT_SUPPORT = 5,
  HCCL_E_NOT_FOUND = 6,
  HCCL_E_UNAVAIL = 7,
  HCCL_E_SYSCALL = 8,
  HCCL_E_TIMEOUT = 9,
  HCCL_E_OPEN_FILE_FAILURE = 10,
  HCCL_E_TCP_CONNECT = 11,
  HCCL_E_ROCE_CONNECT = 12,
  HCCL_E_TCP_TRANSFER = 13,
  HCCL_E_ROCE_TRANSFER = 14,
  HCCL_E_RUNTIME = 15,
  HCCL_E_DRV = 16,
  HCCL_E_PROFILING = 17,
  HCCL_E_CCE = 18,
  HCCL_E_NETWORK = 19,
  HCCL_E_AGAIN = 20,
  HCCL_E_REMOTE = 21,
} HcclResult;

typedef enum : int {
  HCCL_REDUCE_SUM = 0,
  HCCL_REDUCE_PROD = 1,
  HCCL_REDUCE_MAX = 2,
  HCCL_REDUCE_MIN = 3,
} HcclReduceOp;

typedef enum : int {
  HCCL_DATA_TYPE_INT8 = 0,
  HCCL_DATA_TYPE_INT16 = 1,
  HCCL_DATA_TYPE_INT32 = 2,
  HCCL_DATA_TYPE_FP16 = 3,
  HCCL_DATA_TYPE_FP32 = 4,
  HCCL_DATA_TYPE_INT64 = 5,
  HCCL_DATA_TYPE_UINT64 = 6,
  HCCL_DATA_TYPE_UINT8 = 7,
  HCCL_DATA_TYPE_UINT16 = 8,
  HCCL_DATA_TYPE_UINT32 = 9,
  HCCL_DATA_TYPE_FP64 = 10,
  HCCL_DATA_TYPE_BFP16 = 11,
} HcclDataType;

// Opaque to the caller: rank 0 makes it and hands the same bytes to every rank.
const uint32_t HCCL_ROOT_INFO_BYTES = 4108;
typedef struct HcclRootInfoDef {
  char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

}  // extern "C"

namespace oao::hccl {

// Environment variables the vendor reads, in seconds: how long HcclCommInitRootInfo waits for
// every rank, and how long a collective waits for its peers.
inline constexpr const char* kConnectTimeoutEnv = "HCCL_CONNECT_TIMEOUT";
inline constexpr const char* kExecTimeoutEnv = "HCCL_EXEC_TIMEOUT";
inline constexpr int kDefaultConnectTimeout = 120;
inline constexpr int kDefaultExecTimeout = 1836;

using GetRootInfo = HcclResult (*)(HcclRootInfo* root_info);
using CommInitRootInfo = HcclResult (*)(uint32_t n_ranks, const HcclRootInfo* root_info, uint32_t rank,
                                        HcclComm* comm);
using CommDestroy = HcclResult (*)(HcclComm comm);
using GetRankSize = HcclResult (*)(HcclComm comm, uint32_t* rank_size);
using GetRankId = HcclResult (*)(HcclComm comm, uint32_t* rank);
using AllReduce = HcclResult (*)(void* send_buf, void* recv_buf, uint64_t count, HcclDataType data_type,
                                 HcclReduceOp op, HcclComm comm, aclrtStream stream);
using Broadcast = HcclResult (*)(void* buf, uint64_t count, HcclDataType data_type, uint32_t root,
                                 HcclComm comm, aclrtStream stream);
// sendBuf holds nRanks * recvCount elements; rank r receives the reduction of block r.
using ReduceScatter = HcclResult (*)(void* send_buf, void* recv_buf, uint64_t recv_count,
                                     HcclDataType data_type, HcclReduceOp op, HcclComm comm,
                                     aclrtStream stream);
// recvBuf receives nRanks * sendCount elements, in rank order.
using AllGather = HcclResult (*)(void* send_buf, void* recv_buf, uint64_t send_count, HcclDataType data_type,
                                 HcclComm comm, aclrtStream stream);
using Barrier = HcclResult (*)(HcclComm comm, aclrtStream stream);

}  // namespace oao::hccl
