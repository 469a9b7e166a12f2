#include <array>
#include <vector>

#include "aclnn/call.h"
#include "aclnn/grouped_matmul_limits.h"
#include "aclnn/standard/layout_abi.h"
#include "ort/grouped_matmul_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct GroupedMatmulAclnn : AclnnKernel<GroupedMatmulSignature<T>> {
  using AclnnKernel<GroupedMatmulSignature<T>>::AclnnKernel;
  using typename AclnnKernel<GroupedMatmulSignature<T>>::Args;
  // group_list stays where the routing computed it, on the device, as torch_npu's grouped matmul
  // takes it: the run copies the counts back once to check them (AclnnCall::to_host), and the vendor
  // reads them in place, so no copy is queued before the node nor uploaded after it.
  static constexpr std::array<schema::InputIndex, 0> kHostInputs{};
  Ort::Status read(const Io& io, Args& a) const { return this->read_shapes(io, a); }
  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    GroupedMatmulShape s = a.s;
    if (auto status = check_grouped_matmul_limits<T>(this->kName, call.cann().family(), s); !status.IsOK())
      return status;
    const std::vector<int64_t> counts = call.to_host<int64_t>(a.group_list, s.groups);
    if (auto status = check_counts(this->kName, counts.data(), s); !status.IsOK()) return status;
    auto* y = io.output<T>(schema::GroupedMatmul::kOutput_y, a.y);
    if (element_count(a.y) == 0) return Ort::Status(nullptr);
    constexpr aclDataType type = acl_type<T>();
    if (s.k == 0) {  // empty sums; the vendor refuses an empty x
      return call.run<acl::InplaceFillScalarPrepare>("aclnnInplaceFillScalar", call.tensor(y, a.y, type),
                                                     call.scalar(0.0, ACL_FLOAT));
    }
    // With transpose_weight the vendor takes [E, K, N] as a view of the stored [E, N, K] (its
    // "transposed tensor" is a non-contiguous one), which it tells from the strides.
    const Shape weight_shape = {s.groups, s.k, s.n};
    const aclTensor* weight = s.transpose_weight
                                  ? call.view(a.weight.data, weight_shape, {s.n * s.k, 1, s.k}, 0, a.weight.shape, type)
                                  : call.tensor(a.weight.data, weight_shape, type);
    auto* out = const_cast<aclTensorList*>(call.tensor_list({call.tensor(y, a.y, type)}));
    constexpr int64_t kSingleTensor = 3, kRowsGrouped = 0, kCounts = 1, kNoActivation = 0;
    return call.run<acl::GroupedMatmulV4Prepare>(
        "aclnnGroupedMatmulV4", call.tensor_list({call.tensor(a.x.data, a.x.shape, type)}), call.tensor_list({weight}),
        nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, call.tensor(a.group_list, {s.groups}, ACL_INT64), nullptr,
        nullptr, nullptr, kSingleTensor, kRowsGrouped, kCounts, kNoActivation, out, nullptr, nullptr);
  }
};

}  // namespace

void add_grouped_matmul_aclnn(OpList& ops) { add_float_types<GroupedMatmulAclnn>(ops, kAclnnEp); }

}  // namespace oao
