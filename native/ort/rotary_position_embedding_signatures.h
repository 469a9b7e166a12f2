// What RotaryPositionEmbedding and its grad look like to ONNX Runtime on every execution provider:
// slot types, the mode attribute and the contract's rules (cos and sin share a shape that
// broadcasts to dy's, the last axis never broadcast; D suits the mode).
#pragma once

#include "ort/io.h"
#include "ort/schema.h"

namespace oao {

// Checks the rules for `data` (dy, or the forward's x) of shape `shape` against cos and sin, and
// `mode` against the op's schema's `modes`. cos has data's rank, as in every aclnn layout (BNSD
// with 11SD, ..., TND with T1D).
template <size_t N>
Ort::Status check_rotary_position_embedding(const char* op, const char* data_name, const Shape& shape,
                                            const Shape& cos, const Shape& sin, int64_t mode,
                                            const int64_t (&modes)[N]) {
  if (auto error = choice_error("mode", mode, modes); !error.empty()) return op_error(op, error);
  if (shape.empty())
    return op_error(op, std::string("input '") + data_name + "' has rank 0; it needs a last axis D");
  if (cos != sin) {
    return op_error(
        op, "inputs 'cos' " + shape_str(cos) + " and 'sin' " + shape_str(sin) + " must have the same shape");
  }
  const int64_t d = shape.back();
  if (mode == 2 ? d % 4 != 0 : d % 2 != 0) {
    return op_error(op, "the last axis D = " + std::to_string(d) + " of '" + data_name + "' must be " +
                            (mode == 2 ? "a multiple of 4 in mode 2 (quarter)" : "even in modes 0, 1 and 3"));
  }
  bool broadcasts = cos.size() == shape.size() && cos.back() == d;
  for (size_t i = 0; broadcasts && i + 1 < shape.size(); ++i) broadcasts = cos[i] == shape[i] || cos[i] == 1;
  if (!broadcasts) {
    return op_error(op, "input 'cos' " + shape_str(cos) + " must have the rank of '" + data_name + "' " +
                            shape_str(shape) +
                            " and broadcast to it unchanged, the last axis never broadcast");
  }
  return Ort::Status(nullptr);
}

template <class T>
struct RotaryPositionEmbeddingSignature : Signature {
  using Schema = schema::RotaryPositionEmbedding;
  static constexpr const char* kName = Schema::kName;
  static constexpr TypeOf kTypes[] = {{"T", element_type<T>()}};

  explicit RotaryPositionEmbeddingSignature(const OrtKernelInfo* info)
      : mode(attribute<int64_t>(info, "mode").value_or(Schema::kMode)) {}

  struct Args {
    Input<T> x, cos, sin;
  };
  // The inputs, checked against the contract.
  Ort::Status read(const Io& io, Args& a) const {
    a.x = io.input<T>(Schema::kInput_x);
    a.cos = io.input<T>(Schema::kInput_cos);
    a.sin = io.input<T>(Schema::kInput_sin);
    return check_rotary_position_embedding(kName, "x", a.x.shape, a.cos.shape, a.sin.shape, mode,
                                           Schema::kModeChoices);
  }

  int64_t mode;
};

template <class T>
struct RotaryPositionEmbeddingGradSignature : Signature {
  using Schema = schema::RotaryPositionEmbeddingGrad;
  static constexpr const char* kName = Schema::kName;
  static constexpr TypeOf kTypes[] = {{"T", element_type<T>()}};

  explicit RotaryPositionEmbeddingGradSignature(const OrtKernelInfo* info)
      : mode(attribute<int64_t>(info, "mode").value_or(Schema::kMode)) {}

  struct Args {
    Input<T> dy, cos, sin;
    std::optional<Input<T>> x;
  };
  // The inputs, checked against the contract.
  Ort::Status read(const Io& io, Args& a) const {
    a.dy = io.input<T>(Schema::kInput_dy);
    a.cos = io.input<T>(Schema::kInput_cos);
    a.sin = io.input<T>(Schema::kInput_sin);
    a.x = io.input<T>(Schema::kInput_x);
    if (auto status = check_rotary_position_embedding(kName, "dy", a.dy.shape, a.cos.shape, a.sin.shape, mode,
                                                      Schema::kModeChoices);
        !status.IsOK())
      return status;
    if (a.x && a.x->shape != a.dy.shape) {
      return op_error(kName, "input 'x' has shape " + shape_str(a.x->shape) + " but must equal dy's shape " +
                                 shape_str(a.dy.shape));
    }
    return Ort::Status(nullptr);
  }

  // dx, dcos and dsin (null data where the node does not take them or they are empty) and whether
  // the node takes dcos or dsin: an empty output has null data too, so that is asked of the values.
  struct Outputs {
    storage_t<T>* dx;
    storage_t<T>* dcos;
    storage_t<T>* dsin;
    bool sums;
  };
  // The outputs, and the contract's rule on the sums (they need x).
  static Ort::Status outputs(const Io& io, const Args& a, Outputs& o) {
    o.dx = io.output<T>(Schema::kOutput_dx, a.dy.shape);
    const Ort::UnownedValue dcos = io.output_value(Schema::kOutput_dcos, a.cos.shape),
                            dsin = io.output_value(Schema::kOutput_dsin, a.cos.shape);
    o.dcos = Io::data<T>(dcos);
    o.dsin = Io::data<T>(dsin);
    o.sums = dcos != nullptr || dsin != nullptr;
    if (o.sums && !a.x)
      return op_error(kName, "outputs 'dcos' and 'dsin' need input 'x'; without x only dx is produced");
    return Ort::Status(nullptr);
  }

  int64_t mode;
};

}  // namespace oao
