#include "aclnn/call.h"
#include "aclnn/swi_glu_limits.h"
#include "ort/ops.h"
#include "ort/swi_glu_signatures.h"

namespace oao {
namespace {

template <class T>
struct SwiGluGradAclnn : AclnnKernel<SwiGluGradSignature<T>> {
  using AclnnKernel<SwiGluGradSignature<T>>::AclnnKernel;
  using typename AclnnKernel<SwiGluGradSignature<T>>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    const Shape& shape = a.x.shape;
    if (auto status = check_swi_glu_product<T>(this->kName, call.cann().family(), shape); !status.IsOK())
      return status;
    auto* dx = io.output<T>(schema::SwiGluGrad::kOutput_dx, shape);
    if (element_count(shape) == 0) return Ort::Status(nullptr);  // the vendor refuses empty tensors
    return call.run<acl::SwiGluGradPrepare>("aclnnSwiGluGrad", call.tensor(a.dy.data, a.g.y, acl_type<T>()),
                                            call.tensor(a.x.data, shape, acl_type<T>()),
                                            static_cast<int64_t>(a.g.axis), call.tensor(dx, shape, acl_type<T>()));
  }
};

}  // namespace

void add_swi_glu_grad_aclnn(OpList& ops) { add_float_types<SwiGluGradAclnn>(ops, kAclnnEp); }

}  // namespace oao
