#include "kernels/rms_norm_grad.h"

#include "ort/ops.h"
#include "ort/rms_norm_signatures.h"

namespace oao {
namespace {

template <class T, class TG>
struct RmsNormGradKernel : RmsNormGradSignature<T, TG> {
  using RmsNormGradSignature<T, TG>::RmsNormGradSignature;

  using typename RmsNormGradSignature<T, TG>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    rms_norm_grad(a.dy.data, a.x.data, a.rstd.data, a.gamma.data,
                  io.output<T>(schema::RmsNormGrad::kOutput_dx, a.x.shape),
                  io.output<float>(schema::RmsNormGrad::kOutput_dgamma, a.gamma.shape), a.g.rows, a.g.cols,
                  io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_rms_norm_grad_cpu(OpList& ops) { add_all_pairs<RmsNormGradKernel>(ops, kCpu); }

}  // namespace oao
