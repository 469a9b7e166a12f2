#include "aclnn/call.h"
#include "aclnn/rms_norm_limits.h"
#include "ort/ops.h"
#include "ort/rms_norm_signatures.h"

namespace oao {
namespace {

template <class T, class TG>
struct RmsNormGradAclnn : AclnnKernel<RmsNormGradSignature<T, TG>> {
  using AclnnKernel<RmsNormGradSignature<T, TG>>::AclnnKernel;
  using typename AclnnKernel<RmsNormGradSignature<T, TG>>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    const Shape& shape = a.x.shape;
    AclnnCall call(this->kName, io, this->allocator.get());
    // The page's limit on inference products is on the last axis alone.
    if (auto status = check_rms_norm_product<T, TG>(this->kName, call.cann().family(), shape, shape.back());
        !status.IsOK())
      return status;
    auto* dx = io.output<T>(schema::RmsNormGrad::kOutput_dx, shape);
    auto* dgamma = io.output<float>(schema::RmsNormGrad::kOutput_dgamma, a.gamma.shape);
    // rstd goes in its keepdims form whatever shape it came in (aclnn only counts its elements).
    return call.run<acl::RmsNormGradPrepare>("aclnnRmsNormGrad", call.tensor(a.dy.data, shape, acl_type<T>()),
                                             call.tensor(a.x.data, shape, acl_type<T>()),
                                             call.tensor(a.rstd.data, rstd_shape(shape, a.g.n), ACL_FLOAT),
                                             call.tensor(a.gamma.data, a.gamma.shape, acl_type<TG>()),
                                             call.tensor(dx, shape, acl_type<T>()),
                                             call.tensor(dgamma, a.gamma.shape, ACL_FLOAT));
  }
};

}  // namespace

void add_rms_norm_grad_aclnn(OpList& ops) { add_all_pairs<RmsNormGradAclnn>(ops, kAclnnEp); }

}  // namespace oao
