#include "kernels/lightning_indexer.h"

#include "ort/lightning_indexer_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct LightningIndexerKernel : LightningIndexerSignature<T> {
  using LightningIndexerSignature<T>::LightningIndexerSignature;

  using typename LightningIndexerSignature<T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    const LightningIndexerShape& s = a.s;
    if (auto status = check_blas_sizes(this->kName, s); !status.IsOK()) return status;
    const Shape out_shape = this->output_shape(a.query.shape);
    lightning_indexer(a.query.data, a.key.data, a.weights.data, s.spans, s.n1, s.d, s.k,
                      static_cast<int>(this->sparse_mode),
                      io.output<int32_t>(schema::LightningIndexer::kOutput_sparse_indices, out_shape),
                      io.output<T>(schema::LightningIndexer::kOutput_sparse_values, out_shape),
                      io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_lightning_indexer_cpu(OpList& ops) { add_float_types<LightningIndexerKernel>(ops, kCpu); }

}  // namespace oao
