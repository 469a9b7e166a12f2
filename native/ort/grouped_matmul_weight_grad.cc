#include "kernels/grouped_matmul_weight_grad.h"

#include "ort/grouped_matmul_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct GroupedMatmulWeightGradKernel : GroupedMatmulWeightGradSignature<T> {
  using GroupedMatmulWeightGradSignature<T>::GroupedMatmulWeightGradSignature;

  using typename GroupedMatmulWeightGradSignature<T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    grouped_matmul_weight_grad(a.x.data, a.dy.data,
                               io.output<T>(schema::GroupedMatmulWeightGrad::kOutput_dweight, a.dweight), a.s,
                               io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_grouped_matmul_weight_grad_cpu(OpList& ops) { add_float_types<GroupedMatmulWeightGradKernel>(ops, kCpu); }

}  // namespace oao
