// Elementwise standard ops: ONNX's broadcasting is the vendor's, so each is one aclnn call on the
// node's own tensors; the variadic ones (Sum, Max, Min) fold pairwise into the output.
#include <string>

#include "aclnn/standard/elementwise_abi.h"
#include "aclnn/standard/rows.h"

namespace oao::standard {
namespace {

// The broadcast shape of inputs [first, last), or an error naming the first input that does not
// broadcast with the ones before it.
Shape broadcast_inputs(Call& call, size_t first, size_t last) {
  Shape shape = call.input(first).shape;
  for (size_t i = first + 1; i < last; ++i) {
    const auto next = broadcast(shape, call.input(i).shape);
    if (!next) {
      throw Ort::Exception("input " + std::to_string(i) + " " + shape_str(call.input(i).shape) +
                               " does not broadcast with " + shape_str(shape),
                           ORT_INVALID_ARGUMENT);
    }
    shape = *next;
  }
  return shape;
}

// aclnnAdd's alpha in the operands' own kind: an exact integer, else a float.
aclDataType alpha_type(ONNXTensorElementDataType type) {
  return type == kI64 ? ACL_INT64 : type == kI32 ? ACL_INT32 : ACL_FLOAT;
}

template <const char* kFunction>
Ort::Status unary(Call& call) {
  const Tensor x = call.input(0);
  void* y = call.output(0, x.shape);
  if (x.count() == 0) return Ort::Status(nullptr);
  return call.aclnn().run<acl::UnaryPrepare>(kFunction, call.tensor(x),
                                             call.tensor(y, x.shape, call.output_type(0)));
}

template <const char* kFunction>
Ort::Status binary(Call& call) {
  const Tensor a = call.input(0), b = call.input(1);
  const Shape shape = broadcast_inputs(call, 0, 2);
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  return call.aclnn().run<acl::BinaryPrepare>(kFunction, call.tensor(a), call.tensor(b),
                                              call.tensor(y, shape, call.output_type(0)));
}

template <const char* kFunction>
Ort::Status alpha_binary(Call& call) {
  const Tensor a = call.input(0), b = call.input(1);
  const Shape shape = broadcast_inputs(call, 0, 2);
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  return call.aclnn().run<acl::AlphaBinaryPrepare>(kFunction, call.tensor(a), call.tensor(b),
                                                   call.aclnn().scalar(1.0, alpha_type(a.type)),
                                                   call.tensor(y, shape, call.output_type(0)));
}

// ONNX's integer Div truncates toward zero: aclnnDivMod's mode 1. Floats divide exactly.
Ort::Status div(Call& call) {
  const Tensor a = call.input(0), b = call.input(1);
  const Shape shape = broadcast_inputs(call, 0, 2);
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  const aclTensor* out = call.tensor(y, shape, call.output_type(0));
  if (a.type == kI32 || a.type == kI64) {
    return call.aclnn().run<acl::DivModPrepare>("aclnnDivMod", call.tensor(a), call.tensor(b), 1, out);
  }
  return call.aclnn().run<acl::BinaryPrepare>("aclnnDiv", call.tensor(a), call.tensor(b), out);
}

// Sum, Max, Min of any number of inputs: the first two into the output, then the output with
// each next one, in place (the vendor's functions take out aliasing self).
template <const char* kFunction, bool kAlpha>
Ort::Status fold(Call& call) {
  const size_t n = call.input_count();
  const Shape shape = broadcast_inputs(call, 0, n);
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  const ONNXTensorElementDataType type = call.output_type(0);
  if (n == 1) {
    const Tensor x = call.input(0);
    call.aclnn().copy_on_stream(y, x.data, x.bytes());
    // The copy alone is the result; a launch-free call waits for it (AclnnCall::copy_on_stream).
    return Ort::Status(nullptr);
  }
  for (size_t i = 1; i < n; ++i) {
    const aclTensor* self = i == 1 ? call.tensor(call.input(0)) : call.tensor(y, shape, type);
    const aclTensor* other = call.tensor(call.input(i));
    const aclTensor* out = call.tensor(y, shape, type);
    Ort::Status status = kAlpha ? call.aclnn().run<acl::AlphaBinaryPrepare>(
                                      kFunction, self, other, call.aclnn().scalar(1.0, alpha_type(type)), out)
                                : call.aclnn().run<acl::BinaryPrepare>(kFunction, self, other, out);
    if (!status.IsOK()) return status;
  }
  return Ort::Status(nullptr);
}

Ort::Status where(Call& call) {
  const Shape shape = broadcast_inputs(call, 0, 3);
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  return call.aclnn().run<acl::WherePrepare>("aclnnSWhere", call.tensor(call.input(0)),
                                             call.tensor(call.input(1)), call.tensor(call.input(2)),
                                             call.tensor(y, shape, call.output_type(0)));
}

Ort::Status cast(Call& call) {
  const Tensor x = call.input(0);
  void* y = call.output(0, x.shape);
  if (x.count() == 0) return Ort::Status(nullptr);
  const ONNXTensorElementDataType to = call.output_type(0);
  return call.aclnn().run<acl::CastPrepare>("aclnnCast", call.tensor(x), acl_type_of(to),
                                            call.tensor(y, x.shape, to));
}

// IsNaN: NaN alone differs from itself (aclnnNeTensor of x with x; the vendor has no aclnnIsNan).
Ort::Status is_nan(Call& call) {
  const Tensor x = call.input(0);
  void* y = call.output(0, x.shape);
  if (x.count() == 0) return Ort::Status(nullptr);
  const aclTensor* self = call.tensor(x);
  return call.aclnn().run<acl::BinaryPrepare>("aclnnNeTensor", self, call.tensor(x),
                                              call.tensor(y, x.shape, kBool));
}

// Gelu (opset 20): approximate "none" (erf) or "tanh", aclnnGeluV2's 0 and 1.
Ort::Status gelu(Call& call) {
  const std::string approximate = call.attribute_string("approximate").value_or("none");
  if (approximate != "none" && approximate != "tanh") {
    return call.error("attribute 'approximate' is \"" + approximate + "\"; it must be \"none\" or \"tanh\"");
  }
  const Tensor x = call.input(0);
  void* y = call.output(0, x.shape);
  if (x.count() == 0) return Ort::Status(nullptr);
  return call.aclnn().run<acl::GeluV2Prepare>("aclnnGeluV2", call.tensor(x), approximate == "tanh" ? 1 : 0,
                                              call.tensor(y, x.shape, call.output_type(0)));
}

// Mod: fmod=0 is the remainder with the divisor's sign (Python's %: aclnnRemainderTensorTensor), which
// ONNX defines for integers only; fmod=1 C's fmod, the dividend's sign (aclnnFmodTensor).
Ort::Status mod(Call& call) {
  const Tensor a = call.input(0), b = call.input(1);
  const bool fmod = call.attribute_int("fmod", 0) != 0;
  if (!fmod && a.type != kI32 && a.type != kI64) {
    return call.error(std::string("fmod=0 takes integers; ") + type_name_of(a.type) +
                      " inputs need fmod=1 (ONNX's rule)");
  }
  const Shape shape = broadcast_inputs(call, 0, 2);
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  return call.aclnn().run<acl::BinaryPrepare>(fmod ? "aclnnFmodTensor" : "aclnnRemainderTensorTensor",
                                              call.tensor(a), call.tensor(b),
                                              call.tensor(y, shape, call.output_type(0)));
}

// Function names as template arguments need linkage.
constexpr char kAdd[] = "aclnnAdd", kSub[] = "aclnnSub", kMul[] = "aclnnMul", kPow[] = "aclnnPowTensorTensor",
               kMaximum[] = "aclnnMaximum", kMinimum[] = "aclnnMinimum", kEq[] = "aclnnEqTensor",
               kLt[] = "aclnnLtTensor", kLe[] = "aclnnLeTensor", kGt[] = "aclnnGtTensor",
               kGe[] = "aclnnGeTensor", kAnd[] = "aclnnLogicalAnd", kOr[] = "aclnnLogicalOr",
               kXor[] = "aclnnLogicalXor", kNot[] = "aclnnLogicalNot", kNeg[] = "aclnnNeg",
               kExp[] = "aclnnExp", kLog[] = "aclnnLog", kSqrt[] = "aclnnSqrt",
               kReciprocal[] = "aclnnReciprocal", kSigmoid[] = "aclnnSigmoid", kTanh[] = "aclnnTanh",
               kSin[] = "aclnnSin", kCos[] = "aclnnCos", kAbs[] = "aclnnAbs", kRelu[] = "aclnnRelu",
               kErf[] = "aclnnErf", kFloor[] = "aclnnFloor", kCeil[] = "aclnnCeil";

// The output's element type is the attribute's: ONNX's TensorProto codes are ORT's element types.
Ort::Status cast_type(Ort::ShapeInferContext& ctx) {
  return ctx.SetOutputShape(0, ctx.GetInputShape(0),
                            static_cast<ONNXTensorElementDataType>(ctx.GetAttrInt("to")));
}

}  // namespace

std::vector<Row> elementwise_rows() {
  return {
      {"Add", kAdd, alpha_binary<kAdd>, 2, 1, typed(kNumbers, 3)},
      {"Sub", kSub, alpha_binary<kSub>, 2, 1, typed(kNumbers, 3)},
      {"Mul", kMul, binary<kMul>, 2, 1, typed(kNumbers, 3)},
      {"Div", "aclnnDiv, aclnnDivMod", div, 2, 1, typed(kNumbers, 3)},
      {"Pow", kPow, binary<kPow>, 2, 1, typed(kFloats, 3)},
      Row{"Sum", kAdd, fold<kAdd, true>, 1, 1, typed(kNumbers, 2)}.repeats_last_input(),
      Row{"Max", kMaximum, fold<kMaximum, false>, 1, 1, typed(kNumbers, 2)}.repeats_last_input(),
      Row{"Min", kMinimum, fold<kMinimum, false>, 1, 1, typed(kNumbers, 2)}.repeats_last_input(),
      {"Equal", kEq, binary<kEq>, 2, 1, typed(kAll, 2, {}, {kBool})},
      {"Less", kLt, binary<kLt>, 2, 1, typed(kNumbers, 2, {}, {kBool})},
      {"LessOrEqual", kLe, binary<kLe>, 2, 1, typed(kNumbers, 2, {}, {kBool})},
      {"Greater", kGt, binary<kGt>, 2, 1, typed(kNumbers, 2, {}, {kBool})},
      {"GreaterOrEqual", kGe, binary<kGe>, 2, 1, typed(kNumbers, 2, {}, {kBool})},
      {"And", kAnd, binary<kAnd>, 2, 1, {{kBool, kBool, kBool}}},
      {"Or", kOr, binary<kOr>, 2, 1, {{kBool, kBool, kBool}}},
      {"Xor", kXor, binary<kXor>, 2, 1, {{kBool, kBool, kBool}}},
      {"Not", kNot, unary<kNot>, 1, 1, {{kBool, kBool}}},
      {"Neg", kNeg, unary<kNeg>, 1, 1, typed(kNumbers, 2)},
      {"Abs", kAbs, unary<kAbs>, 1, 1, typed(kNumbers, 2)},
      {"Exp", kExp, unary<kExp>, 1, 1, typed(kFloats, 2)},
      {"Log", kLog, unary<kLog>, 1, 1, typed(kFloats, 2)},
      {"Sqrt", kSqrt, unary<kSqrt>, 1, 1, typed(kFloats, 2)},
      {"Reciprocal", kReciprocal, unary<kReciprocal>, 1, 1, typed(kFloats, 2)},
      {"Sigmoid", kSigmoid, unary<kSigmoid>, 1, 1, typed(kFloats, 2)},
      {"Tanh", kTanh, unary<kTanh>, 1, 1, typed(kFloats, 2)},
      {"Sin", kSin, unary<kSin>, 1, 1, typed(kFloats, 2)},
      {"Cos", kCos, unary<kCos>, 1, 1, typed(kFloats, 2)},
      {"Relu", kRelu, unary<kRelu>, 1, 1, typed(kFloats, 2)},
      {"Erf", kErf, unary<kErf>, 1, 1, typed(kFloats, 2)},
      {"Floor", kFloor, unary<kFloor>, 1, 1, typed(kFloats, 2)},
      {"Ceil", kCeil, unary<kCeil>, 1, 1, typed(kFloats, 2)},
      {"Gelu", "aclnnGeluV2", gelu, 1, 1, typed(kFloats, 2)},
      {"IsNaN", "aclnnNeTensor", is_nan, 1, 1, typed(kFloats, 1, {}, {kBool})},
      {"Mod", "aclnnRemainderTensorTensor, aclnnFmodTensor", mod, 2, 1, typed(kNumbers, 3)},
      {"Where", "aclnnSWhere", where, 3, 1, typed(kAll, 3, {kBool})},
      Row{"Cast", "aclnnCast", cast, 1, 1,
          pairs(kAll, kAll, [](auto from, auto to) { return Types{from, to}; })}
          .output_types_by(cast_type),
  };
}

}  // namespace oao::standard
