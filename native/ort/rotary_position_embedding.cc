#include "kernels/rotary_position_embedding.h"

#include "ort/ops.h"
#include "ort/rotary_position_embedding_signatures.h"

namespace oao {
namespace {

template <class T>
struct RotaryPositionEmbeddingKernel : RotaryPositionEmbeddingSignature<T> {
  using RotaryPositionEmbeddingSignature<T>::RotaryPositionEmbeddingSignature;

  Ort::Status Compute(const Io& io) const {
    const auto x = *io.input<T>(0), cos = *io.input<T>(1), sin = *io.input<T>(2);
    if (auto status = check_rotary_position_embedding(this->kName, "x", x.shape, cos.shape, sin.shape, this->mode); !status.IsOK())
      return status;
    auto* y = io.output<T>(0, x.shape);
    if (element_count(x.shape) == 0) return Ort::Status(nullptr);  // an empty x may claim any other extents
    rotary_position_embedding(x.data, cos.data, sin.data, y, x.shape, cos.shape, static_cast<int>(this->mode),
                              io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_rotary_position_embedding_cpu(OpList& ops) { add_float_types<RotaryPositionEmbeddingKernel>(ops, kCpu); }

}  // namespace oao
