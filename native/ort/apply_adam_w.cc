#include "kernels/apply_adam_w.h"

#include "ort/apply_adam_w_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class TP, class T>
struct ApplyAdamWKernel : ApplyAdamWSignature<TP, T> {
  using ApplyAdamWSignature<TP, T>::ApplyAdamWSignature;

  using typename ApplyAdamWSignature<TP, T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    const Shape& shape = a.param.shape;
    // Each output is its input's buffer where ORT honours the alias map, another buffer otherwise.
    apply_adam_w(a.param.data, a.exp_avg.data, a.exp_avg_sq.data, a.grad.data, a.scalars,
                 io.output<TP>(schema::ApplyAdamW::kOutput_param_out, shape),
                 io.output<TP>(schema::ApplyAdamW::kOutput_exp_avg_out, shape),
                 io.output<TP>(schema::ApplyAdamW::kOutput_exp_avg_sq_out, shape), element_count(shape),
                 io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_apply_adam_w_cpu(OpList& ops) { add_all_pairs<ApplyAdamWKernel>(ops, kCpu); }

}  // namespace oao
