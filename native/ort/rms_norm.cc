#include "kernels/rms_norm.h"

#include "ort/ops.h"
#include "ort/rms_norm_signatures.h"

namespace oao {
namespace {

template <class T, class TG>
struct RmsNormKernel : RmsNormSignature<T, TG> {
  using RmsNormSignature<T, TG>::RmsNormSignature;

  using typename RmsNormSignature<T, TG>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    rms_norm(a.x.data, a.gamma.data, this->epsilon, io.output<T>(schema::RmsNorm::kOutput_y, a.x.shape),
             io.output<float>(schema::RmsNorm::kOutput_rstd, rstd_shape(a.x.shape, a.g.n)), a.g.rows,
             a.g.cols, io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_rms_norm_cpu(OpList& ops) { add_all_pairs<RmsNormKernel>(ops, kCpu); }

}  // namespace oao
