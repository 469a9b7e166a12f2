#include "kernels/rotary_position_embedding_grad.h"

#include "ort/ops.h"
#include "ort/rotary_position_embedding_signatures.h"

namespace oao {
namespace {

template <class T>
struct RotaryPositionEmbeddingGradKernel : RotaryPositionEmbeddingGradSignature<T> {
  using RotaryPositionEmbeddingGradSignature<T>::RotaryPositionEmbeddingGradSignature;

  using typename RotaryPositionEmbeddingGradSignature<T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    typename RotaryPositionEmbeddingGradSignature<T>::Outputs o;
    if (auto status = this->outputs(io, a, o); !status.IsOK()) return status;
    const int64_t sum_count = element_count(a.cos.shape);
    if (element_count(a.dy.shape) == 0) {  // nothing to sum; an empty dy may claim any other extents
      for (auto* sum : {o.dcos, o.dsin})
        if (sum != nullptr) std::fill_n(sum, sum_count, from_float<storage_t<T>>(0.f));
      return Ort::Status(nullptr);
    }
    // The kernel computes both sums together; one the node does not take goes to scratch.
    std::vector<storage_t<T>> scratch(o.sums && (o.dcos == nullptr || o.dsin == nullptr) ? sum_count : 0);
    rotary_position_embedding_grad(a.dy.data, a.cos.data, a.sin.data, o.sums ? a.x->data : nullptr, o.dx,
                                   o.dcos ? o.dcos : scratch.data(), o.dsin ? o.dsin : scratch.data(),
                                   a.dy.shape, a.cos.shape, static_cast<int>(this->mode), io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_rotary_position_embedding_grad_cpu(OpList& ops) { add_float_types<RotaryPositionEmbeddingGradKernel>(ops, kCpu); }

}  // namespace oao
