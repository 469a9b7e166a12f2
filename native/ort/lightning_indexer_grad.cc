#include "kernels/lightning_indexer_grad.h"

#include "ort/lightning_indexer_shapes.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct IndexerGradKernel {
  static constexpr const char* kName = "LightningIndexerGrad";
  static constexpr ONNXTensorElementDataType kT = element_type<T>();
  static constexpr ONNXTensorElementDataType kAny = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  static constexpr Slot kInputs[] = {{"query", kT},
                                     {"key", kT},
                                     {"dy", kT},
                                     {"sparse_indices", kAny},
                                     {"weights", kT},
                                     {"actual_seq_lengths_query", kAny, true},
                                     {"actual_seq_lengths_key", kAny, true}};
  static constexpr Slot kOutputs[] = {{"d_query", kT}, {"d_key", kT}, {"d_weights", kT}};

  // pre_tokens, next_tokens and deterministic are accepted and change nothing, as in aclnn (and
  // the CPU results are deterministic anyway).
  explicit IndexerGradKernel(const OrtKernelInfo* info)
      : layout(attribute<std::string>(info, "layout").value_or("BSND")),
        sparse_mode(attribute<int64_t>(info, "sparse_mode").value_or(3)),
        head_num(attribute<int64_t>(info, "head_num")) {}

  Ort::Status Compute(const Io& io) const {
    const auto query = *io.input<T>(0), key = *io.input<T>(1), dy = *io.input<T>(2),
               weights = *io.input<T>(4);
    const auto indices = *io.untyped_input(3);
    IndexerChecks checks(kName, layout, sparse_mode);
    IndexerShape s;
    checks.query_key(query.shape, key.shape, s);
    if (!checks.ok()) return checks.status();
    s.k = dy.shape.empty() ? 0 : dy.shape.back();
    checks.head_num(head_num, s.n1);
    checks.per_token("weights", weights.shape, query.shape, s.n1);
    checks.per_token("dy", dy.shape, query.shape, s.k);
    checks.per_token("sparse_indices", indices.shape, query.shape, s.k);
    checks.lengths("actual_seq_lengths_query", io.untyped_input(5), query.shape[0], s.spans.query_end);
    checks.lengths("actual_seq_lengths_key", io.untyped_input(6), key.shape[0], s.spans.key_end);
    checks.same_batches(s);
    checks.blas_sizes(s);
    if (!checks.ok()) return checks.status();
    if (indices.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)
      return run(io, query, key, dy, weights, static_cast<const int32_t*>(indices.data), s);
    if (indices.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)
      return run(io, query, key, dy, weights, static_cast<const int64_t*>(indices.data), s);
    return op_error(kName, "input 'sparse_indices' must be int32 or int64");
  }

  template <class I>
  Ort::Status run(const Io& io, const Input<T>& query, const Input<T>& key, const Input<T>& dy,
                  const Input<T>& weights, const I* indices, const IndexerShape& s) const {
    if (const BadIndex bad = find_bad_index(indices, s.spans, s.k, static_cast<int>(sparse_mode));
        bad.token >= 0) {
      return op_error(kName, "sparse_indices of token " + std::to_string(bad.token) + ", slot " +
                                 std::to_string(bad.slot) + " is " + std::to_string(bad.index) +
                                 "; it must be -1 or inside [0, " + std::to_string(bad.key_rows) +
                                 "), the key rows of its batch");
    }
    lightning_indexer_grad(query.data, key.data, dy.data, indices, weights.data, s.spans, s.n1, s.d, s.k,
                           static_cast<int>(sparse_mode), io.output<T>(0, query.shape),
                           io.output<T>(1, key.shape), io.output<T>(2, weights.shape), io.parallel());
    return Ort::Status(nullptr);
  }

  std::string layout;
  int64_t sparse_mode;
  std::optional<int64_t> head_num;
};

}  // namespace

void add_lightning_indexer_grad_cpu(OpList& ops) { add_float_types<IndexerGradKernel>(ops); }

}  // namespace oao
