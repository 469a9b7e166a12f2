#include "kernels/rms_norm.h"

#include "ort/ops.h"
#include "ort/rms_norm_shapes.h"

namespace oao {
namespace {

template <class T, class TG>
struct RmsNormKernel : RmsNormSignature<T, TG> {
  using RmsNormSignature<T, TG>::RmsNormSignature;

  Ort::Status Compute(const Io& io) const {
    if constexpr (!allowed_pair<T, TG>()) {
      return pair_error<T, TG>(this->kName);
    } else {
      const auto x = *io.input<T>(0);
      const auto gamma = *io.input<TG>(1);
      NormGeometry g;
      if (auto status = norm_geometry(this->kName, x.shape, gamma.shape, g); !status.IsOK()) return status;
      auto* y = io.output<T>(0, x.shape);
      auto* rstd = io.output<float>(1, rstd_shape(x.shape, g.n));
      rms_norm(x.data, gamma.data, this->epsilon, y, rstd, g.rows, g.cols, io.parallel());
      return Ort::Status(nullptr);
    }
  }
};

}  // namespace

void add_rms_norm_cpu(OpList& ops) { add_all_pairs<RmsNormKernel>(ops, kCpu); }

}  // namespace oao
