#include "aclnn/call.h"
#include "aclnn/rms_norm_limits.h"
#include "ort/ops.h"
#include "ort/rms_norm_shapes.h"

namespace oao {
namespace {

template <class T, class TG>
struct RmsNormGradAclnn : RmsNormGradSignature<T, TG> {
  explicit RmsNormGradAclnn(const OrtKernelInfo* info)
      : RmsNormGradSignature<T, TG>(info), allocator(device_allocator(info)) {}

  Ort::Status Compute(const Io& io) const {
    if constexpr (!allowed_pair<T, TG>()) {
      return pair_error<T, TG>(this->kName);
    } else {
      const auto dy = *io.input<T>(0), x = *io.input<T>(1);
      const auto rstd = *io.input<float>(2);
      const auto gamma = *io.input<TG>(3);
      NormGeometry g;
      if (auto status = this->check(dy.shape, x.shape, rstd.shape, gamma.shape, g); !status.IsOK())
        return status;
      AclnnCall call(this->kName, io, allocator.get());
      // The page's limit on inference products is on the last axis alone.
      if (auto status =
              check_rms_norm_product<T, TG>(this->kName, call.cann().family(), x.shape, x.shape.back());
          !status.IsOK())
        return status;
      auto* dx = io.output<T>(0, x.shape);
      auto* dgamma = io.output<float>(1, gamma.shape);
      // rstd goes in its keepdims form whatever shape it came in (aclnn only counts its elements).
      return call.run<acl::RmsNormGradPrepare>(
          "aclnnRmsNormGrad", call.tensor(dy.data, dy.shape, acl_type<T>()),
          call.tensor(x.data, x.shape, acl_type<T>()),
          call.tensor(rstd.data, rstd_shape(x.shape, g.n), ACL_FLOAT),
          call.tensor(gamma.data, gamma.shape, acl_type<TG>()), call.tensor(dx, x.shape, acl_type<T>()),
          call.tensor(dgamma, gamma.shape, ACL_FLOAT));
    }
  }

  DeviceAllocator allocator;
};

}  // namespace

void add_rms_norm_grad_aclnn(OpList& ops) { add_all_pairs<RmsNormGradAclnn>(ops, kAclnnEp); }

}  // namespace oao
