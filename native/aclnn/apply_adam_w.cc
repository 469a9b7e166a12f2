#include "aclnn/apply_adam_w_limits.h"
#include "aclnn/call.h"
#include "ort/apply_adam_w_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class TP, class T>
struct ApplyAdamWAclnn : AclnnKernel<ApplyAdamWSignature<TP, T>> {
  using AclnnKernel<ApplyAdamWSignature<TP, T>>::AclnnKernel;
  using typename AclnnKernel<ApplyAdamWSignature<TP, T>>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    const Shape& shape = a.param.shape;
    if (auto status = check_apply_adam_w_product<TP, T>(this->kName, call.cann().family(), shape); !status.IsOK())
      return status;
    // The vendor takes step as a device tensor and lr as a host float; both arrive on the host.
    const int64_t step = static_cast<int64_t>(a.step);
    if (step != a.step) {
      return op_error(this->kName, "aclnnApplyAdamWV2 counts whole steps; 'step' is " + std::to_string(a.step));
    }
    const int64_t count = element_count(shape);
    const size_t bytes = static_cast<size_t>(count) * sizeof(TP);
    // aclnn updates varRef, mRef and vRef in place: the outputs, holding the inputs' values
    // already where ORT made them the inputs' buffers (the alias map), copied in otherwise.
    using Schema = schema::ApplyAdamW;
    const void* ins[] = {a.param.data, a.exp_avg.data, a.exp_avg_sq.data};
    void* outs[] = {io.output<TP>(Schema::kOutput_param_out, shape),
                    io.output<TP>(Schema::kOutput_exp_avg_out, shape),
                    io.output<TP>(Schema::kOutput_exp_avg_sq_out, shape)};
    if (count == 0) return Ort::Status(nullptr);  // aclnn's tiling refuses empty tensors
    const aclTensor* step_tensor = call.tensor(call.scalar_to_device(&step, sizeof step), {1}, ACL_INT64);
    for (size_t i = 0; i < 3; ++i) call.copy_on_stream(outs[i], ins[i], bytes);
    const auto ref = [&](void* data) { return const_cast<aclTensor*>(call.tensor(data, shape, acl_type<TP>())); };
    return call.run<acl::ApplyAdamWPrepare>(
        "aclnnApplyAdamWV2", ref(outs[0]), ref(outs[1]), ref(outs[2]), static_cast<aclTensor*>(nullptr),
        call.tensor(a.grad.data, shape, acl_type<T>()), step_tensor, static_cast<float>(a.lr), this->beta1, this->beta2,
        this->weight_decay, this->eps, false, this->maximize == 1);
  }
};

}  // namespace

void add_apply_adam_w_aclnn(OpList& ops) { add_all_pairs<ApplyAdamWAclnn>(ops, kAclnnEp); }

}  // namespace oao
