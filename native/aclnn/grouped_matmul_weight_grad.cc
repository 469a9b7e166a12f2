#include <array>
#include <vector>

#include "aclnn/call.h"
#include "aclnn/grouped_matmul_limits.h"
#include "aclnn/standard/elementwise_abi.h"
#include "aclnn/standard/layout_abi.h"
#include "ort/grouped_matmul_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

// Per group, left^T @ right over the group's rows: left [M, P] and right [M, Q] give [E, P, Q].
// dweight is x^T @ dy ([E, K, N]), or with transpose_weight dy^T @ x ([E, N, K]).
struct Operands {
  const void* left;
  int64_t p;
  const void* right;
  int64_t q;
};

template <class T>
struct GroupedMatmulWeightGradAclnn : AclnnKernel<GroupedMatmulWeightGradSignature<T>> {
  using AclnnKernel<GroupedMatmulWeightGradSignature<T>>::AclnnKernel;
  using typename AclnnKernel<GroupedMatmulWeightGradSignature<T>>::Args;
  // group_list stays where the routing computed it, on the device, as torch_npu's grouped matmul
  // takes it: the run copies the counts back once to check them (AclnnCall::to_host), and the vendor
  // reads them in place, so no copy is queued before the node nor uploaded after it.
  static constexpr std::array<schema::InputIndex, 0> kHostInputs{};
  Ort::Status read(const Io& io, Args& a) const { return this->read_shapes(io, a); }
  static constexpr aclDataType kType = acl_type<T>();
  static constexpr int64_t kCounts = 1, kTokensGrouped = 2;  // groupListType, groupType (the K axis)

  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    GroupedMatmulShape s = a.s;
    if (auto status = check_grouped_matmul_weight_grad_limits<T>(this->kName, call.cann().family(), s);
        !status.IsOK())
      return status;
    const std::vector<int64_t> counts = call.to_host<int64_t>(a.group_list, s.groups);
    if (auto status = check_counts(this->kName, counts.data(), s); !status.IsOK()) return status;
    auto* dweight = io.output<T>(schema::GroupedMatmulWeightGrad::kOutput_dweight, a.dweight);
    if (element_count(a.dweight) == 0) return Ort::Status(nullptr);
    if (s.m == 0) return fill_zeros(call, dweight, a.dweight, kType);  // empty sums; the vendor refuses empty x
    const Operands o = s.transpose_weight ? Operands{a.dy.data, s.n, a.x.data, s.k}
                                          : Operands{a.x.data, s.k, a.dy.data, s.n};
    const aclTensor* group_list = call.tensor(a.group_list, {s.groups}, ACL_INT64);
    if constexpr (std::is_same_v<T, float>) {
      return float32(call, s, o, group_list, dweight, a.dweight);
    } else {
      return accumulated(call, s, o, group_list, dweight, a.dweight);
    }
  }

  static Ort::Status fill_zeros(AclnnCall& call, void* data, const Shape& shape, aclDataType type) {
    return call.run<acl::InplaceFillScalarPrepare>("aclnnInplaceFillScalar", call.tensor(data, shape, type),
                                                   call.scalar(0.0, ACL_FLOAT));
  }

  // float16 and bfloat16: aclnnGroupedMatmulAddV2 sums into a zeroed float32 accumulator, which is
  // rounded to T once. Its x "must be transposed": it takes the stored [M, P] as the [K, M] of its
  // formula. A group of no rows adds nothing, so it stays zero.
  static Ort::Status accumulated(AclnnCall& call, const GroupedMatmulShape& s, const Operands& o,
                                 const aclTensor* group_list, void* dweight, const Shape& shape) {
    void* sums = call.scratch(static_cast<size_t>(element_count(shape)) * sizeof(float));
    if (auto status = fill_zeros(call, sums, shape, ACL_FLOAT); !status.IsOK()) return status;
    auto* y_ref = const_cast<aclTensor*>(call.tensor(sums, shape, ACL_FLOAT));
    if (auto status = call.run<acl::GroupedMatmulAddV2Prepare>(
            "aclnnGroupedMatmulAddV2", call.tensor(o.left, {s.m, o.p}, kType), call.tensor(o.right, {s.m, o.q}, kType),
            group_list, y_ref, true, false, kTokensGrouped, kCounts);
        !status.IsOK())
      return status;
    return call.run<acl::CastPrepare>("aclnnCast", call.tensor(sums, shape, ACL_FLOAT), kType,
                                      call.tensor(dweight, shape, kType));
  }

  // float32, which the Add function does not take: aclnnGroupedMatmulV4 with the contraction (token)
  // axis grouped, writing dweight itself. Its transposed x is [P, M] viewed over the stored [M, P].
  // Its kernel writes zeros for a group of no rows (ops-transformer's EmptyTensorCompute).
  static Ort::Status float32(AclnnCall& call, const GroupedMatmulShape& s, const Operands& o,
                             const aclTensor* group_list, void* dweight, const Shape& shape) {
    const aclTensor* left = call.view(o.left, {o.p, s.m}, {1, o.p}, 0, {s.m, o.p}, kType);
    auto* out = const_cast<aclTensorList*>(call.tensor_list({call.tensor(dweight, shape, kType)}));
    constexpr int64_t kSingleTensor = 3, kNoActivation = 0;
    return call.run<acl::GroupedMatmulV4Prepare>(
        "aclnnGroupedMatmulV4", call.tensor_list({left}), call.tensor_list({call.tensor(o.right, {s.m, o.q}, kType)}),
        nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, group_list, nullptr, nullptr, nullptr, kSingleTensor,
        kTokensGrouped, kCounts, kNoActivation, out, nullptr, nullptr);
  }
};

}  // namespace

void add_grouped_matmul_weight_grad_aclnn(OpList& ops) { add_float_types<GroupedMatmulWeightGradAclnn>(ops, kAclnnEp); }

}  // namespace oao
