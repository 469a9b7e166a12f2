#include "kernels/rotary_position_embedding.h"

#include "ort/ops.h"
#include "ort/rotary_position_embedding_signatures.h"

namespace oao {
namespace {

template <class T>
struct RotaryPositionEmbeddingKernel : RotaryPositionEmbeddingSignature<T> {
  using RotaryPositionEmbeddingSignature<T>::RotaryPositionEmbeddingSignature;

  using typename RotaryPositionEmbeddingSignature<T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    auto* y = io.output<T>(schema::RotaryPositionEmbedding::kOutput_y, a.x.shape);
    if (element_count(a.x.shape) == 0) return Ort::Status(nullptr);  // an empty x may claim any other extents
    rotary_position_embedding(a.x.data, a.cos.data, a.sin.data, y, a.x.shape, a.cos.shape,
                              static_cast<int>(this->mode), io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_rotary_position_embedding_cpu(OpList& ops) { add_float_types<RotaryPositionEmbeddingKernel>(ops, kCpu); }

}  // namespace oao
