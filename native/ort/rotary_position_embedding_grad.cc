#include "kernels/rotary_position_embedding_grad.h"

#include "ort/ops.h"
#include "ort/rotary_position_embedding_signatures.h"

namespace oao {
namespace {

template <class T>
struct RotaryPositionEmbeddingGradKernel : RotaryPositionEmbeddingGradSignature<T> {
  using RotaryPositionEmbeddingGradSignature<T>::RotaryPositionEmbeddingGradSignature;

  Ort::Status Compute(const Io& io) const {
    const auto dy = *io.input<T>(0), cos = *io.input<T>(1), sin = *io.input<T>(2);
    const auto x = io.input<T>(3);
    const std::optional<Shape> x_shape = x ? std::optional(x->shape) : std::nullopt;
    if (auto status = this->check(dy.shape, cos.shape, sin.shape, x_shape); !status.IsOK()) return status;
    auto* dx = io.output<T>(0, dy.shape);
    const auto [dcos, dsin, sums] = this->sum_outputs(io, cos.shape);
    if (auto status = this->check_sums(sums, x.has_value()); !status.IsOK()) return status;
    if (element_count(dy.shape) == 0) {  // nothing to sum; an empty dy may claim any other extents
      for (auto* sum : {dcos, dsin})
        if (sum != nullptr) std::fill_n(sum, element_count(cos.shape), from_float<storage_t<T>>(0.f));
      return Ort::Status(nullptr);
    }
    // The kernel computes both sums together; one the node does not take goes to scratch.
    std::vector<storage_t<T>> scratch(sums && (dcos == nullptr || dsin == nullptr) ? element_count(cos.shape)
                                                                                   : 0);
    rotary_position_embedding_grad(dy.data, cos.data, sin.data, sums ? x->data : nullptr, dx,
                                   dcos ? dcos : scratch.data(), dsin ? dsin : scratch.data(), dy.shape,
                                   cos.shape, static_cast<int>(this->mode), io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_rotary_position_embedding_grad_cpu(OpList& ops) { add_float_types<RotaryPositionEmbeddingGradKernel>(ops, kCpu); }

}  // namespace oao
