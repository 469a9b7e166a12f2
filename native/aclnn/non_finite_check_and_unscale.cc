#include "aclnn/call.h"
#include "aclnn/non_finite_check_and_unscale_limits.h"
#include "ort/non_finite_check_and_unscale_signatures.h"
#include "ort/ops.h"

namespace oao {

namespace {

template <class T>
struct NonFiniteCheckAndUnscaleAclnn : AclnnKernel<NonFiniteCheckAndUnscaleSignature<T>> {
  using AclnnKernel<NonFiniteCheckAndUnscaleSignature<T>>::AclnnKernel;
  using typename AclnnKernel<NonFiniteCheckAndUnscaleSignature<T>>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    const Shape& shape = a.grads.shape;
    if (auto status = check_non_finite_check_and_unscale_product(this->kName, call.cann().family(), shape);
        !status.IsOK())
      return status;
    // aclnn updates scaledGrads and foundInf in place: the outputs, holding the inputs' values
    // (the gradients already where ORT made the output their buffer).
    void* grads = io.output<T>(schema::NonFiniteCheckAndUnscale::kOutput_grads_out, shape);
    float* found =
        io.output<float>(schema::NonFiniteCheckAndUnscale::kOutput_found_inf_out, a.found_inf.shape);
    call.copy_on_stream(found, a.found_inf.data, sizeof(float));
    const int64_t count = element_count(shape);
    if (count == 0) return Ort::Status(nullptr);  // the vendor refuses empty tensors; the flag stands
    call.copy_on_stream(grads, a.grads.data, static_cast<size_t>(count) * sizeof(T));
    return call.run<acl::ForeachNonFiniteCheckAndUnscalePrepare>(
        "aclnnForeachNonFiniteCheckAndUnscale", call.tensor_list({call.tensor(grads, shape, acl_type<T>())}),
        call.tensor(found, {1}, ACL_FLOAT), call.tensor(a.inv_scale.data, {1}, ACL_FLOAT));
  }
};

}  // namespace

void add_non_finite_check_and_unscale_aclnn(OpList& ops) {
  add_float_types<NonFiniteCheckAndUnscaleAclnn>(ops, kAclnnEp);
}

}  // namespace oao
