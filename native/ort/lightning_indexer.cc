#include "kernels/lightning_indexer.h"

#include "ort/lightning_indexer_shapes.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct IndexerKernel {
  static constexpr const char* kName = "LightningIndexer";
  static constexpr ONNXTensorElementDataType kT = element_type<T>();
  static constexpr ONNXTensorElementDataType kAny = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  static constexpr Slot kInputs[] = {{"query", kT},
                                     {"key", kT},
                                     {"weights", kT},
                                     {"actual_seq_lengths_query", kAny, true},
                                     {"actual_seq_lengths_key", kAny, true}};
  static constexpr Slot kOutputs[] = {{"sparse_indices", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32},
                                      {"sparse_values", kT}};

  explicit IndexerKernel(const OrtKernelInfo* info)
      : layout(attribute<std::string>(info, "layout").value_or("BSND")),
        sparse_mode(attribute<int64_t>(info, "sparse_mode").value_or(3)),
        sparse_count(attribute<int64_t>(info, "sparse_count").value_or(2048)) {}

  Ort::Status Compute(const Io& io) const {
    const auto query = *io.input<T>(0), key = *io.input<T>(1), weights = *io.input<T>(2);
    IndexerChecks checks(kName, layout, sparse_mode);
    IndexerShape s;
    checks.query_key(query.shape, key.shape, s);
    if (!checks.ok()) return checks.status();
    if (sparse_count < 1) {
      return op_error(kName,
                      "attribute 'sparse_count' is " + std::to_string(sparse_count) + "; it must be >= 1");
    }
    s.k = sparse_count;
    checks.per_token("weights", weights.shape, query.shape, s.n1);
    checks.lengths("actual_seq_lengths_query", io.untyped_input(3), query.shape[0], s.spans.query_end);
    checks.lengths("actual_seq_lengths_key", io.untyped_input(4), key.shape[0], s.spans.key_end);
    checks.same_batches(s);
    checks.blas_sizes(s);
    if (!checks.ok()) return checks.status();
    Shape out_shape(query.shape.begin(), query.shape.end() - 2);
    out_shape.push_back(s.k);
    lightning_indexer(query.data, key.data, weights.data, s.spans, s.n1, s.d, s.k,
                      static_cast<int>(sparse_mode), io.output<int32_t>(0, out_shape),
                      io.output<T>(1, out_shape), io.parallel());
    return Ort::Status(nullptr);
  }

  std::string layout;
  int64_t sparse_mode, sparse_count;
};

}  // namespace

void add_lightning_indexer_cpu(OpList& ops) { add_float_types<IndexerKernel>(ops); }

}  // namespace oao
