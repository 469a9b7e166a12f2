#include "kernels/non_finite_check_and_unscale.h"

#include "ort/non_finite_check_and_unscale_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct NonFiniteCheckAndUnscaleKernel : NonFiniteCheckAndUnscaleSignature<T> {
  using NonFiniteCheckAndUnscaleSignature<T>::NonFiniteCheckAndUnscaleSignature;

  using typename NonFiniteCheckAndUnscaleSignature<T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    // The output is the gradients' buffer where ORT honours the alias map, another buffer otherwise.
    const bool found = non_finite_check_and_unscale(
        a.grads.data, *a.inv_scale.data,
        io.output<T>(schema::NonFiniteCheckAndUnscale::kOutput_grads_out, a.grads.shape),
        element_count(a.grads.shape), io.parallel());
    *io.output<float>(schema::NonFiniteCheckAndUnscale::kOutput_found_inf_out, a.found_inf.shape) =
        found ? 1.f : *a.found_inf.data;
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_non_finite_check_and_unscale_cpu(OpList& ops) {
  add_float_types<NonFiniteCheckAndUnscaleKernel>(ops, kCpu);
}

}  // namespace oao
