#include "aclnn/call.h"
#include "aclnn/rms_norm_limits.h"
#include "ort/ops.h"
#include "ort/rms_norm_signatures.h"

namespace oao {
namespace {

template <class T, class TG>
struct RmsNormAclnn : AclnnKernel<RmsNormSignature<T, TG>> {
  using AclnnKernel<RmsNormSignature<T, TG>>::AclnnKernel;
  using typename AclnnKernel<RmsNormSignature<T, TG>>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    // Rows of no elements would still need an rstd, and aclnn's tiling refuses empty axes.
    if (a.g.cols == 0 && a.g.rows > 0) {
      return op_error(this->kName, "input 'gamma' " + shape_str(a.gamma.shape) +
                                       " is empty; aclnnRmsNorm refuses empty normalized axes");
    }
    AclnnCall call(this->kName, io, this->allocator.get());
    if (auto status = check_rms_norm_product<T, TG>(this->kName, call.cann().family(), a.x.shape, a.g.cols);
        !status.IsOK())
      return status;
    const Shape rstd_dims = rstd_shape(a.x.shape, a.g.n);
    auto* y = io.output<T>(schema::RmsNorm::kOutput_y, a.x.shape);
    auto* rstd = io.output<float>(schema::RmsNorm::kOutput_rstd, rstd_dims);
    if (a.g.rows == 0) return Ort::Status(nullptr);  // nothing to compute; aclnn's tiling refuses empty axes
    return call.run<acl::RmsNormPrepare>(
        "aclnnRmsNorm", call.tensor(a.x.data, a.x.shape, acl_type<T>()),
        call.tensor(a.gamma.data, a.gamma.shape, acl_type<TG>()), static_cast<double>(this->epsilon),
        call.tensor(y, a.x.shape, acl_type<T>()), call.tensor(rstd, rstd_dims, ACL_FLOAT));
  }
};

}  // namespace

void add_rms_norm_aclnn(OpList& ops) { add_all_pairs<RmsNormAclnn>(ops, kAclnnEp); }

}  // namespace oao
