#include "kernels/swi_glu.h"

#include "ort/ops.h"
#include "ort/swi_glu_signatures.h"

namespace oao {
namespace {

template <class T>
struct SwiGluKernel : SwiGluSignature<T> {
  using SwiGluSignature<T>::SwiGluSignature;

  using typename SwiGluSignature<T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    swi_glu(a.x.data, io.output<T>(schema::SwiGlu::kOutput_y, a.g.y), a.g.outer, a.g.half, io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_swi_glu_cpu(OpList& ops) { add_float_types<SwiGluKernel>(ops, kCpu); }

}  // namespace oao
