#include "kernels/lightning_indexer.h"

#include "ort/lightning_indexer_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct LightningIndexerKernel : LightningIndexerSignature<T> {
  using LightningIndexerSignature<T>::LightningIndexerSignature;

  Ort::Status Compute(const Io& io) const {
    const auto query = *io.input<T>(0), key = *io.input<T>(1), weights = *io.input<T>(2);
    LightningIndexerShape s;
    if (auto status =
            this->check(query.shape, key.shape, weights.shape, io.untyped_input(3), io.untyped_input(4), s);
        !status.IsOK())
      return status;
    if (auto status = check_blas_sizes(this->kName, s); !status.IsOK()) return status;
    const Shape out_shape = this->output_shape(query.shape);
    lightning_indexer(query.data, key.data, weights.data, s.spans, s.n1, s.d, s.k,
                      static_cast<int>(this->sparse_mode), io.output<int32_t>(0, out_shape),
                      io.output<T>(1, out_shape), io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_lightning_indexer_cpu(OpList& ops) { add_float_types<LightningIndexerKernel>(ops, kCpu); }

}  // namespace oao
