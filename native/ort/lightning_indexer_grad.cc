#include "kernels/lightning_indexer_grad.h"

#include "ort/lightning_indexer_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct LightningIndexerGradKernel : LightningIndexerGradSignature<T> {
  using LightningIndexerGradSignature<T>::LightningIndexerGradSignature;

  Ort::Status Compute(const Io& io) const {
    const auto query = *io.input<T>(0), key = *io.input<T>(1), dy = *io.input<T>(2),
               weights = *io.input<T>(4);
    const auto indices = *io.untyped_input(3);
    LightningIndexerShape s;
    if (auto status = this->check(query.shape, key.shape, dy.shape, indices.shape, weights.shape,
                                  io.untyped_input(5), io.untyped_input(6), s);
        !status.IsOK())
      return status;
    if (auto status = check_blas_sizes(this->kName, s); !status.IsOK()) return status;
    if (indices.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)
      return run(io, query, key, dy, weights, static_cast<const int32_t*>(indices.data), s);
    if (indices.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)
      return run(io, query, key, dy, weights, static_cast<const int64_t*>(indices.data), s);
    return op_error(this->kName, "input 'sparse_indices' must be int32 or int64");
  }

  template <class I>
  Ort::Status run(const Io& io, const Input<T>& query, const Input<T>& key, const Input<T>& dy,
                  const Input<T>& weights, const I* indices, const LightningIndexerShape& s) const {
    if (auto status = this->check_indices(indices, s); !status.IsOK()) return status;
    lightning_indexer_grad(query.data, key.data, dy.data, indices, weights.data, s.spans, s.n1, s.d, s.k,
                           static_cast<int>(this->sparse_mode), io.output<T>(0, query.shape),
                           io.output<T>(1, key.shape), io.output<T>(2, weights.shape), io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_lightning_indexer_grad_cpu(OpList& ops) { add_float_types<LightningIndexerGradKernel>(ops, kCpu); }

}  // namespace oao
