#include "kernels/rms_norm_grad.h"

#include "ort/ops.h"
#include "ort/rms_norm_shapes.h"

namespace oao {
namespace {

template <class T, class TG>
struct RmsNormGradKernel : RmsNormGradSignature<T, TG> {
  using RmsNormGradSignature<T, TG>::RmsNormGradSignature;

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
      auto* dx = io.output<T>(0, x.shape);
      auto* dgamma = io.output<float>(1, gamma.shape);
      rms_norm_grad(dy.data, x.data, rstd.data, gamma.data, dx, dgamma, g.rows, g.cols, io.parallel());
      return Ort::Status(nullptr);
    }
  }
};

}  // namespace

void add_rms_norm_grad_cpu(OpList& ops) { add_all_pairs<RmsNormGradKernel>(ops, kCpu); }

}  // namespace oao
