// Softmax, LogSoftmax (opset 13: along one axis) and the losses built on them. The vendor's
// functions take up to 8 axes; a longer tensor is viewed as [outer, axis, inner] (a row-major
// reshape). NegativeLogLikelihoodLoss runs aclnnNLLLoss on [N, C] and aclnnNLLLoss2d on
// [N, C, H, W], which every other layout [N, C, d1, ..., dk] is as [N, C, d1 * ... * dk, 1]: the
// class axis stays where both functions want it, so no permute is needed.
// SoftmaxCrossEntropyLoss is aclnnLogSoftmax along the class axis, then that loss.
#include "aclnn/standard/matmul_abi.h"
#include "aclnn/standard/rows.h"

namespace oao::standard {
namespace {

constexpr size_t kMaxSoftmaxRank = 8;  // aclnnSoftmax's and aclnnLogSoftmax's pages

// aclnnSoftmax or aclnnLogSoftmax of `x` along `axis` into `y` (both of `shape`).
Ort::Status run_softmax(Call& call, const char* function, const void* x, void* y, const Shape& shape,
                        int64_t axis, ONNXTensorElementDataType type) {
  Shape view = shape;
  int64_t dim = axis;
  if (shape.size() > kMaxSoftmaxRank) {
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= shape[k];
    for (size_t k = axis + 1; k < shape.size(); ++k) inner *= shape[k];
    view = {outer, shape[axis], inner};
    dim = 1;
  }
  return call.aclnn().run<acl::SoftmaxPrepare>(function, call.tensor(x, view, type), dim,
                                               call.tensor(y, view, type));
}

template <const char* kFunction>
Ort::Status softmax(Call& call) {
  const Tensor x = call.input(0);
  const int64_t axis = call.axis(call.attribute_int("axis", -1), x.shape.size(), "axis");
  void* y = call.output(0, x.shape);
  if (x.count() == 0) return Ort::Status(nullptr);
  return run_softmax(call, kFunction, x.data, y, x.shape, axis, x.type);
}

// The names a loss op gives its inputs, for errors.
struct LossNames {
  const char* input;
  const char* target;
  const char* weight;
};

// The vendor's reduction code for ONNX's attribute (default "mean").
int64_t reduction_code(const Call& call) {
  const std::string reduction = call.attribute_string("reduction").value_or("mean");
  if (reduction == "none") return 0;
  if (reduction == "mean") return 1;
  if (reduction == "sum") return 2;
  throw Ort::Exception(
      "attribute 'reduction' is \"" + reduction + "\"; it must be \"none\", \"mean\" or \"sum\"",
      ORT_INVALID_ARGUMENT);
}

// Valid targets lie in [0, C): with no ignore_index, a negative one ignores none of them. -100
// (torch's default) rather than INT64_MIN: the device compares int32 targets in int32.
constexpr int64_t kIgnoreNone = -100;

// ONNX's NegativeLogLikelihoodLoss of `log_prob` ([N, C, d1, ..., dk], of the node's type) against
// input 1 (the target) weighted by input 2 (optional), into output 0.
Ort::Status nll_loss(Call& call, const void* log_prob, const Shape& shape, const LossNames& names) {
  const Tensor target = call.input(1);
  if (shape.size() < 2) {
    return call.error(std::string("input '") + names.input + "' " + shape_str(shape) +
                      " must have at least 2 axes [N, C, d1, ..., dk]");
  }
  Shape want = {shape[0]};
  want.insert(want.end(), shape.begin() + 2, shape.end());
  if (target.shape != want) {
    return call.error(std::string("input '") + names.target + "' " + shape_str(target.shape) + " must be " +
                      shape_str(want) + " ([N, d1, ..., dk] of '" + names.input + "' " + shape_str(shape) +
                      ")");
  }
  const int64_t classes = shape[1];
  if (call.has_input(2) && call.input(2).shape != Shape{classes}) {
    return call.error(std::string("input '") + names.weight + "' " + shape_str(call.input(2).shape) +
                      " must be [" + std::to_string(classes) + "] (one weight per class)");
  }
  const int64_t reduction = reduction_code(call);
  const int64_t ignore_index = call.attribute_int("ignore_index").value_or(kIgnoreNone);
  const ONNXTensorElementDataType type = call.output_type(0);

  void* loss = call.output(0, reduction == 0 ? target.shape : Shape{});
  // A reduction over no targets still has a value (mean NaN, sum 0): the vendor's to write.
  if (reduction == 0 && target.count() == 0) return Ort::Status(nullptr);

  AclnnCall& aclnn = call.aclnn();
  const void* weight = call.has_input(2) ? call.input(2).data : nullptr;
  if (weight == nullptr) {
    // The functions take no NULL weight: ONNX's absent one is all ones.
    void* ones = aclnn.scratch(static_cast<size_t>(classes) * type_size(type));
    if (classes > 0) {
      Ort::Status status =
          aclnn.run<acl::InplaceOnePrepare>("aclnnInplaceOne", call.tensor(ones, {classes}, type));
      if (!status.IsOK()) return status;
    }
    weight = ones;
  }
  void* total_weight = aclnn.scratch(type_size(type));
  const aclTensor* weight_t = call.tensor(weight, {classes}, type);
  const aclTensor* total_t = call.tensor(total_weight, {1}, type);
  if (shape.size() == 2) {
    return aclnn.run<acl::NllLossPrepare>(
        "aclnnNLLLoss", call.tensor(log_prob, shape, type), call.tensor(target), weight_t, reduction,
        ignore_index, call.tensor(loss, reduction == 0 ? target.shape : Shape{}, type), total_t);
  }
  Shape self = shape, labels = target.shape;
  if (shape.size() != 4) {
    int64_t spatial = 1;
    for (size_t k = 2; k < shape.size(); ++k) spatial *= shape[k];
    self = {shape[0], classes, spatial, 1};
    labels = {shape[0], spatial, 1};
  }
  return aclnn.run<acl::NllLossPrepare>(
      "aclnnNLLLoss2d", call.tensor(log_prob, self, type), call.tensor(target.data, labels, target.type),
      weight_t, reduction, ignore_index, call.tensor(loss, reduction == 0 ? labels : Shape{}, type), total_t);
}

Ort::Status negative_log_likelihood_loss(Call& call) {
  const Tensor input = call.input(0);
  return nll_loss(call, input.data, input.shape, {"input", "target", "weight"});
}

// Outputs: the loss, then log_prob when the node asks for it (a variadic output of one or two).
Ort::Status softmax_cross_entropy_loss(Call& call) {
  const Tensor scores = call.input(0);
  if (scores.shape.size() < 2) {
    return call.error("input 'scores' " + shape_str(scores.shape) +
                      " must have at least 2 axes [N, C, d1, ..., dk]");
  }
  const ONNXTensorElementDataType type = call.output_type(0);
  void* log_prob = call.output_count() > 1 ? call.output(1, scores.shape) : nullptr;
  if (log_prob == nullptr) log_prob = call.aclnn().scratch(scores.bytes());
  if (scores.count() > 0) {
    Ort::Status status = run_softmax(call, "aclnnLogSoftmax", scores.data, log_prob, scores.shape, 1, type);
    if (!status.IsOK()) return status;
  }
  return nll_loss(call, log_prob, scores.shape, {"scores", "labels", "weights"});
}

constexpr char kSoftmax[] = "aclnnSoftmax", kLogSoftmax[] = "aclnnLogSoftmax";

// {T, Tind, T} -> T for each float T and integer Tind.
}  // namespace

std::vector<Row> softmax_rows() {
  // Scores, labels (int32 or int64), weights, then the loss.
  const auto losses = pairs(kFloats, {kI32, kI64}, [](auto t, auto i) { return Types{t, i, t, t}; });
  return {
      {"Softmax", kSoftmax, softmax<kSoftmax>, 1, 1, typed(kFloats, 2)},
      {"LogSoftmax", kLogSoftmax, softmax<kLogSoftmax>, 1, 1, typed(kFloats, 2)},
      Row{"NegativeLogLikelihoodLoss", "aclnnNLLLoss, aclnnNLLLoss2d, aclnnInplaceOne",
          negative_log_likelihood_loss, 3, 1, losses}
          .optional_from(2),
      Row{"SoftmaxCrossEntropyLoss", "aclnnLogSoftmax, aclnnNLLLoss, aclnnNLLLoss2d, aclnnInplaceOne",
          softmax_cross_entropy_loss, 3, 1, losses}
          .optional_from(2)
          .repeats_last_output(),
  };
}

}  // namespace oao::standard
