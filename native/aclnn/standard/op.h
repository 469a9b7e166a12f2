// ONNX's standard ops on the NPU. onnxruntime-cann runs few of them on the device (its kernels sit
// at old since-versions, lack bfloat16 and go through the legacy aclop path), so a session made for
// the NPU rewrites each node of them into the same op in kAclnnDomain (src/ort_ascend_ops/cann_ep/),
// whose function body is the standard op: a model stays portable, and here every such op is one
// Row of table.cc, mapping it to its aclnn call. A Row's compute reads the node through a Call
// (inputs, attributes, ONNX's rules for its output shapes) and makes the vendor's calls.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "aclnn/call.h"

namespace oao::standard {

inline constexpr const char* kAclnnDomain = "ort_ascend_ops.aclnn";

using Types = std::vector<ONNXTensorElementDataType>;

constexpr ONNXTensorElementDataType kF32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
constexpr ONNXTensorElementDataType kF16 = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
constexpr ONNXTensorElementDataType kBF16 = ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
constexpr ONNXTensorElementDataType kI32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
constexpr ONNXTensorElementDataType kI64 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
constexpr ONNXTensorElementDataType kBool = ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL;
constexpr ONNXTensorElementDataType kU8 = ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
constexpr ONNXTensorElementDataType kI8 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;

// Constant lists (no global state to initialize): a Types is made from one where a call needs it.
inline constexpr std::initializer_list<ONNXTensorElementDataType> kFloats = {kF32, kF16, kBF16};
inline constexpr std::initializer_list<ONNXTensorElementDataType> kNumbers = {kF32, kF16, kBF16, kI32, kI64};
inline constexpr std::initializer_list<ONNXTensorElementDataType> kAll = {kF32, kF16,  kBF16, kI32,
                                                                          kI64, kBool, kU8,   kI8};

aclDataType acl_type_of(ONNXTensorElementDataType type);
const char* type_name_of(ONNXTensorElementDataType type);
size_t type_size(ONNXTensorElementDataType type);

// One input or output as the kernel sees it; data is device memory (host memory for a Row's
// host inputs).
struct Tensor {
  Shape shape;
  ONNXTensorElementDataType type;
  const void* data;
  int64_t count() const { return element_count(shape); }
  size_t bytes() const { return static_cast<size_t>(count()) * type_size(type); }
};

class Call {
 public:
  Call(const char* op, OrtKernelContext* ctx, const OrtKernelInfo* info, const Types& output_types,
       OrtAllocator* allocator);

  const char* op() const { return op_; }
  size_t input_count() const { return ctx_.GetInputCount(); }
  bool has_input(size_t i) const { return i < ctx_.GetInputCount() && ctx_.GetInput(i) != nullptr; }
  Tensor input(size_t i) const;
  // A host input's values as int64 (int32 or int64 tensors): shapes, axes, starts.
  std::vector<int64_t> host_ints(size_t i) const;
  // A host input's single value as double (any number type): Range's bounds, a fill value.
  double host_scalar(size_t i) const;

  size_t output_count() const { return ctx_.GetOutputCount(); }
  // Output i allocated with `shape`; its data, null for an empty tensor.
  void* output(size_t i, const Shape& shape);
  // Output i's element type, from the kernel's signature.
  ONNXTensorElementDataType output_type(size_t i) const;

  std::optional<int64_t> attribute_int(const char* name) const;
  std::optional<float> attribute_float(const char* name) const;
  std::optional<std::vector<int64_t>> attribute_ints(const char* name) const;
  std::optional<std::string> attribute_string(const char* name) const;
  int64_t attribute_int(const char* name, int64_t fallback) const {
    return attribute_int(name).value_or(fallback);
  }
  // For the attributes the getters above do not read (ConstantOfShape's tensor).
  const OrtKernelInfo* kernel_info() const { return info_; }

  // aclTensors over a tensor of the node, or over output memory.
  const aclTensor* tensor(const Tensor& t) { return aclnn_.tensor(t.data, t.shape, acl_type_of(t.type)); }
  const aclTensor* tensor(const void* data, const Shape& shape, ONNXTensorElementDataType type) {
    return aclnn_.tensor(data, shape, acl_type_of(type));
  }
  AclnnCall& aclnn() { return aclnn_; }

  // INVALID_ARGUMENT naming the op: "Transpose: input 'data' [2,3] has 2 axes; perm has 3".
  Ort::Status error(const std::string& message) const { return op_error(op_, message); }

  // An axis of a rank-`rank` tensor, ONNX's negative axes counted from the end; throws naming
  // `what` when it is out of range.
  int64_t axis(int64_t value, size_t rank, const char* what) const;

 private:
  const char* op_;
  Ort::KernelContext ctx_;
  const OrtKernelInfo* info_;
  const Types& output_types_;
  AclnnCall aclnn_;
};

using Compute = Ort::Status (*)(Call&);
// Output types ONNX Runtime cannot tell from the input types alone (Cast's, from its attribute):
// ORT types a custom op's outputs by the first kernel whose inputs match, then calls this.
using Infer = Ort::Status (*)(Ort::ShapeInferContext&);

// One ONNX op and the aclnn function(s) it runs on: `signatures` lists, per kernel, the element
// types of its inputs, then its outputs. What most ops do not need is set by the options after the
// braces: Row{"Slice", ...}.on_host({1, 2, 3, 4}).optional_from(3).
struct Row {
  const char* op;
  const char* aclnn;
  Compute compute;
  size_t inputs;
  size_t outputs;
  std::vector<Types> signatures;
  size_t required_inputs = SIZE_MAX;  // the rest are optional (SIZE_MAX: all required)
  bool variadic_inputs = false;       // the last input repeats (Concat, Sum)
  bool variadic_outputs = false;      // the last output repeats (Split)
  std::vector<size_t> host_inputs{};  // read on the host: shapes, axes, bounds
  bool alias = false;                 // output 0 may be input 0's buffer (views: Reshape)
  Infer infer = nullptr;

  Row optional_from(size_t input) && { return required_inputs = input, std::move(*this); }
  Row repeats_last_input() && { return variadic_inputs = true, std::move(*this); }
  Row repeats_last_output() && { return variadic_outputs = true, std::move(*this); }
  Row on_host(std::vector<size_t> slots) && { return host_inputs = std::move(slots), std::move(*this); }
  Row as_view() && { return alias = true, std::move(*this); }
  Row output_types_by(Infer function) && { return infer = function, std::move(*this); }
};

// The table: every standard op the NPU runs (table.cc).
const std::vector<Row>& table();

// Signatures, one per T in `types`: `head` fixed types, then T in `slots` slots, then `tail`
// ({T, T} -> T: typed(kNumbers, 3); Where's {bool, T, T} -> T: typed(kAll, 3, {kBool})).
std::vector<Types> typed(const Types& types, size_t slots, const Types& head = {}, const Types& tail = {});

// Signatures, one per pair (A, B) of `a` x `b`, each `make(A, B)`: the ops whose kernels pair a
// data type with an index type (Gather: {T, I} -> T), or two data types (Cast).
template <class Make>
std::vector<Types> pairs(const Types& a, const Types& b, Make make) {
  std::vector<Types> signatures;
  for (const auto x : a)
    for (const auto y : b) signatures.push_back(make(x, y));
  return signatures;
}

// {T, I} -> T for T in `data` and I in `indices`: data and one index-like input (a shape, axes,
// indices).
inline std::vector<Types> with_index(const Types& data, const Types& indices) {
  return pairs(data, indices, [](auto t, auto i) { return Types{t, i, t}; });
}

// Adds a kernel per signature of every row, for execution provider `ep`.
void add_standard_ops(OpList& ops, const char* ep);

// ONNX's multidirectional broadcasting of shapes; an error naming both inputs when they do not.
std::optional<Shape> broadcast(const Shape& a, const Shape& b);

}  // namespace oao::standard
