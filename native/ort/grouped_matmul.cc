#include "kernels/grouped_matmul.h"

#include "ort/grouped_matmul_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct GroupedMatmulKernel : GroupedMatmulSignature<T> {
  using GroupedMatmulSignature<T>::GroupedMatmulSignature;

  using typename GroupedMatmulSignature<T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    grouped_matmul(a.x.data, a.weight.data, io.output<T>(schema::GroupedMatmul::kOutput_y, a.y), a.s,
                   io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_grouped_matmul_cpu(OpList& ops) { add_float_types<GroupedMatmulKernel>(ops, kCpu); }

}  // namespace oao
