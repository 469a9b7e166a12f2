#include "kernels/lightning_indexer_grad.h"

#include "ort/lightning_indexer_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct LightningIndexerGradKernel : LightningIndexerGradSignature<T> {
  using LightningIndexerGradSignature<T>::LightningIndexerGradSignature;

  using typename LightningIndexerGradSignature<T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    if (auto status = check_blas_sizes(this->kName, a.s); !status.IsOK()) return status;
    if (a.indices.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)
      return run(io, a, static_cast<const int32_t*>(a.indices.data));
    if (a.indices.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)
      return run(io, a, static_cast<const int64_t*>(a.indices.data));
    return op_error(this->kName, "input 'sparse_indices' must be int32 or int64");
  }

  template <class I>
  Ort::Status run(const Io& io, const Args& a, const I* indices) const {
    const LightningIndexerShape& s = a.s;
    if (auto status = this->check_indices(indices, s); !status.IsOK()) return status;
    lightning_indexer_grad(a.query.data, a.key.data, a.dy.data, indices, a.weights.data, s.spans, s.n1, s.d,
                           s.k, static_cast<int>(this->sparse_mode),
                           io.output<T>(schema::LightningIndexerGrad::kOutput_d_query, a.query.shape),
                           io.output<T>(schema::LightningIndexerGrad::kOutput_d_key, a.key.shape),
                           io.output<T>(schema::LightningIndexerGrad::kOutput_d_weights, a.weights.shape),
                           io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_lightning_indexer_grad_cpu(OpList& ops) { add_float_types<LightningIndexerGradKernel>(ops, kCpu); }

}  // namespace oao
