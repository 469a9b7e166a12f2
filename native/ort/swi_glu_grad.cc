#include "kernels/swi_glu_grad.h"

#include "ort/ops.h"
#include "ort/swi_glu_signatures.h"

namespace oao {
namespace {

template <class T>
struct SwiGluGradKernel : SwiGluGradSignature<T> {
  using SwiGluGradSignature<T>::SwiGluGradSignature;

  using typename SwiGluGradSignature<T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    swi_glu_grad(a.dy.data, a.x.data, io.output<T>(schema::SwiGluGrad::kOutput_dx, a.x.shape), a.g.outer, a.g.half,
                 io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_swi_glu_grad_cpu(OpList& ops) { add_float_types<SwiGluGradKernel>(ops, kCpu); }

}  // namespace oao
