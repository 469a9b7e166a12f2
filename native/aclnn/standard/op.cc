#include "aclnn/standard/op.h"

#include <climits>
#include <memory>

namespace oao::standard {

aclDataType acl_type_of(ONNXTensorElementDataType type) {
  switch (type) {
    case kF32:
      return ACL_FLOAT;
    case kF16:
      return ACL_FLOAT16;
    case kBF16:
      return ACL_BF16;
    case kI32:
      return ACL_INT32;
    case kI64:
      return ACL_INT64;
    case kBool:
      return ACL_BOOL;
    case kU8:
      return ACL_UINT8;
    case kI8:
      return ACL_INT8;
    default:
      throw Ort::Exception("element type " + std::to_string(type) + " has no aclDataType here", ORT_FAIL);
  }
}

const char* type_name_of(ONNXTensorElementDataType type) {
  switch (type) {
    case kF32:
      return "float32";
    case kF16:
      return "float16";
    case kBF16:
      return "bfloat16";
    case kI32:
      return "int32";
    case kI64:
      return "int64";
    case kBool:
      return "bool";
    case kU8:
      return "uint8";
    case kI8:
      return "int8";
    default:
      return "an element type without an aclDataType";
  }
}

size_t type_size(ONNXTensorElementDataType type) {
  switch (type) {
    case kF32:
    case kI32:
      return 4;
    case kF16:
    case kBF16:
      return 2;
    case kI64:
      return 8;
    default:
      return 1;
  }
}

Call::Call(const char* op, OrtKernelContext* ctx, const OrtKernelInfo* info, const Types& output_types,
           OrtAllocator* allocator)
    : op_(op),
      ctx_(ctx),
      info_(info),
      output_types_(output_types),
      aclnn_(op, Ort::KernelContext(ctx).GetGPUComputeStream(), allocator) {}

Tensor Call::input(size_t i) const {
  const Ort::ConstValue value = ctx_.GetInput(i);
  const auto info = value.GetTensorTypeAndShapeInfo();
  return Tensor{info.GetShape(), info.GetElementType(), value.GetTensorRawData()};
}

std::vector<int64_t> Call::host_ints(size_t i) const {
  const Tensor t = input(i);
  std::vector<int64_t> values(static_cast<size_t>(t.count()));
  for (size_t k = 0; k < values.size(); ++k) {
    values[k] =
        t.type == kI32 ? static_cast<const int32_t*>(t.data)[k] : static_cast<const int64_t*>(t.data)[k];
  }
  return values;
}

double Call::host_scalar(size_t i) const {
  const Tensor t = input(i);
  if (t.count() != 1) {
    throw Ort::Exception("input " + std::to_string(i) + " " + shape_str(t.shape) + " must hold one value",
                         ORT_INVALID_ARGUMENT);
  }
  switch (t.type) {
    case kF32:
      return *static_cast<const float*>(t.data);
    case kF16:
      return static_cast<float>(*static_cast<const Ort::Float16_t*>(t.data));
    case kBF16:
      return static_cast<float>(*static_cast<const Ort::BFloat16_t*>(t.data));
    case kI32:
      return *static_cast<const int32_t*>(t.data);
    case kI64:
      return static_cast<double>(*static_cast<const int64_t*>(t.data));
    case kBool:
    case kU8:
      return *static_cast<const uint8_t*>(t.data);
    case kI8:
      return *static_cast<const int8_t*>(t.data);
    default:
      throw Ort::Exception("a scalar of an unsupported element type", ORT_INVALID_ARGUMENT);
  }
}

void* Call::output(size_t i, const Shape& shape) {
  if (i >= ctx_.GetOutputCount()) return nullptr;
  Ort::UnownedValue value = ctx_.GetOutput(i, shape);
  return value == nullptr ? nullptr : value.GetTensorMutableRawData();
}

ONNXTensorElementDataType Call::output_type(size_t i) const {
  return output_types_[std::min(i, output_types_.size() - 1)];  // a variadic output repeats its type
}

namespace {

// ORT's getters fail alike for an absent attribute and for one of another type; the rewrite
// (cann_ep) hands over only nodes ONNX's checker accepted, so absent is what a failure means here.
bool ok(OrtStatus* status) {
  if (status == nullptr) return true;
  Ort::GetApi().ReleaseStatus(status);
  return false;
}

}  // namespace

std::optional<int64_t> Call::attribute_int(const char* name) const {
  int64_t value = 0;
  if (!ok(Ort::GetApi().KernelInfoGetAttribute_int64(info_, name, &value))) return std::nullopt;
  return value;
}

std::optional<float> Call::attribute_float(const char* name) const {
  float value = 0;
  if (!ok(Ort::GetApi().KernelInfoGetAttribute_float(info_, name, &value))) return std::nullopt;
  return value;
}

std::optional<std::vector<int64_t>> Call::attribute_ints(const char* name) const {
  size_t size = 0;
  if (!ok(Ort::GetApi().KernelInfoGetAttributeArray_int64(info_, name, nullptr, &size))) return std::nullopt;
  std::vector<int64_t> values(size);
  if (size > 0 && !ok(Ort::GetApi().KernelInfoGetAttributeArray_int64(info_, name, values.data(), &size))) {
    return std::nullopt;
  }
  return values;
}

std::optional<std::string> Call::attribute_string(const char* name) const {
  size_t size = 0;
  if (!ok(Ort::GetApi().KernelInfoGetAttribute_string(info_, name, nullptr, &size))) return std::nullopt;
  std::string value(size, '\0');
  if (!ok(Ort::GetApi().KernelInfoGetAttribute_string(info_, name, value.data(), &size))) return std::nullopt;
  value.resize(size > 0 ? size - 1 : 0);
  return value;
}

int64_t Call::axis(int64_t value, size_t rank, const char* what) const {
  const auto r = static_cast<int64_t>(rank);
  if (value < -r || value >= std::max<int64_t>(r, 1)) {
    throw Ort::Exception(std::string(what) + " " + std::to_string(value) + " is outside [" +
                             std::to_string(-r) + ", " + std::to_string(std::max<int64_t>(r, 1) - 1) +
                             "] for a tensor of " + std::to_string(rank) + " axes",
                         ORT_INVALID_ARGUMENT);
  }
  return value < 0 ? value + r : value;
}

std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k < out.size() - a.size() ? 1 : a[k - (out.size() - a.size())];
    const int64_t db = k < out.size() - b.size() ? 1 : b[k - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[k] = da == 1 ? db : da;
  }
  return out;
}

std::vector<Types> typed(const Types& types, size_t slots, const Types& head, const Types& tail) {
  std::vector<Types> signatures;
  for (const auto type : types) {
    Types signature = head;
    signature.insert(signature.end(), slots, type);
    signature.insert(signature.end(), tail.begin(), tail.end());
    signatures.push_back(signature);
  }
  return signatures;
}

namespace {

struct Kernel {
  Kernel(const Row& row, const Types& output_types, const OrtKernelInfo* info)
      : row(row), output_types(output_types), allocator(device_allocator(info)) {
    Ort::ThrowOnError(Ort::GetApi().CopyKernelInfo(info, &this->info));
  }
  ~Kernel() { Ort::GetApi().ReleaseKernelInfo(info); }
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  OrtStatusPtr ComputeV2(OrtKernelContext* ctx) {
    return guarded(row.op,
                   [&] {
                     Call call(row.op, ctx, info, output_types, allocator.get());
                     const size_t required = std::min(row.required_inputs, row.inputs);
                     for (size_t i = 0; i < required; ++i) {
                       if (!call.has_input(i))
                         return call.error("input " + std::to_string(i) + " is required");
                     }
                     return row.compute(call);
                   })
        .release();
  }

  const Row& row;
  const Types& output_types;
  OrtKernelInfo* info = nullptr;
  DeviceAllocator allocator;
  uploads::Lease uploads;
};

// One kernel of a row: its signature's element types, on one execution provider.
struct StandardOp : Ort::CustomOpBase<StandardOp, Kernel, true> {
  StandardOp(const Row& row, const Types& signature, const char* ep)
      : row(row),
        inputs(signature.begin(), signature.begin() + row.inputs),
        outputs(signature.begin() + row.inputs, signature.end()),
        ep(ep) {
    if (row.infer != nullptr) {
      OrtCustomOp::InferOutputShapeFn = [](const OrtCustomOp* op, OrtShapeInferContext* raw) -> OrtStatusPtr {
        const Row& row = static_cast<const StandardOp*>(op)->row;
        return guarded(row.op,
                       [&] {
                         Ort::ShapeInferContext ctx(&Ort::GetApi(), raw);
                         return row.infer(ctx);
                       })
            .release();
      };
    }
    if (row.alias) {
      // Views (Reshape, Squeeze): the output is the input's own buffer whenever ORT can make it so.
      OrtCustomOp::GetAliasMap = [](int** input, int** output) -> size_t {
        *input = new int[1]{0};
        *output = new int[1]{0};
        return 1;
      };
      OrtCustomOp::ReleaseAliasMap = [](int* input, int* output) {
        delete[] input;
        delete[] output;
      };
    }
  }

  OrtStatusPtr CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const {
    return guarded(row.op,
                   [&] {
                     *kernel = new Kernel(row, outputs, info);
                     return Ort::Status(nullptr);
                   })
        .release();
  }
  const char* GetName() const { return row.op; }
  const char* GetExecutionProviderType() const { return ep; }
  size_t GetInputTypeCount() const { return inputs.size(); }
  ONNXTensorElementDataType GetInputType(size_t i) const { return inputs[i]; }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t i) const {
    if (row.variadic_inputs && i + 1 == inputs.size())
      return OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_VARIADIC;
    return i >= row.required_inputs ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL
                                    : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED;
  }
  OrtMemType GetInputMemoryType(size_t i) const {
    for (const size_t host : row.host_inputs)
      if (host == i) return OrtMemTypeCPUInput;
    return OrtMemTypeDefault;
  }
  size_t GetOutputTypeCount() const { return outputs.size(); }
  ONNXTensorElementDataType GetOutputType(size_t i) const { return outputs[i]; }
  OrtCustomOpInputOutputCharacteristic GetOutputCharacteristic(size_t i) const {
    if (row.variadic_outputs && i + 1 == outputs.size())
      return OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_VARIADIC;
    return OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED;
  }
  // Concat's inputs and Split's outputs are one type; one of them is enough.
  int GetVariadicInputMinArity() const { return 1; }
  bool GetVariadicInputHomogeneity() const { return true; }
  int GetVariadicOutputMinArity() const { return 1; }
  bool GetVariadicOutputHomogeneity() const { return true; }

  const Row& row;
  Types inputs, outputs;
  const char* ep;
};

}  // namespace

void add_standard_ops(OpList& ops, const char* ep) {
  for (const Row& row : table()) {
    for (const Types& signature : row.signatures)
      ops.push_back(std::make_shared<StandardOp>(row, signature, ep));
  }
}

}  // namespace oao::standard
