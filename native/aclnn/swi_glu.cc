#include "aclnn/call.h"
#include "aclnn/swi_glu_limits.h"
#include "ort/ops.h"
#include "ort/swi_glu_signatures.h"

namespace oao {
namespace {

template <class T>
struct SwiGluAclnn : AclnnKernel<SwiGluSignature<T>> {
  using AclnnKernel<SwiGluSignature<T>>::AclnnKernel;
  using typename AclnnKernel<SwiGluSignature<T>>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    if (auto status = check_swi_glu_product<T>(this->kName, call.cann().family(), a.x.shape); !status.IsOK())
      return status;
    auto* y = io.output<T>(schema::SwiGlu::kOutput_y, a.g.y);
    if (element_count(a.x.shape) == 0) return Ort::Status(nullptr);  // the vendor refuses empty tensors
    return call.run<acl::SwiGluPrepare>("aclnnSwiGlu", call.tensor(a.x.data, a.x.shape, acl_type<T>()),
                                        static_cast<int64_t>(a.g.axis), call.tensor(y, a.g.y, acl_type<T>()));
  }
};

}  // namespace

void add_swi_glu_aclnn(OpList& ops) { add_float_types<SwiGluAclnn>(ops, kAclnnEp); }

}  // namespace oao
