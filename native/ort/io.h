// How every op meets ONNX Runtime: its schema's slots (ort/schema.h: names, order, optional), the
// element type its kernel takes for each, and the kernel context read through Io. (ORT's lite API
// was the first choice, but it builds a tensor for every input slot and crashes on one the node
// passes as "", required or optional, and hands out outputs the node does not take; ORT does not
// check custom ops' required slots itself.)
#pragma once

#include <array>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ort/glue.h"
#include "ort/schema.h"

namespace oao {

// A type constraint of the op's schema ("T") and the element type the kernel takes for it: a
// Signature's kTypes, which names every constraint of its schema's slots.
struct TypeOf {
  std::string_view constraint;
  ONNXTensorElementDataType type;
};

// A TypeOf's type for a constraint of several types that the kernel tells apart itself (int32 or
// int64 lengths, say).
constexpr ONNXTensorElementDataType kAnyType = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;

// The element type of a slot's schema type: its constraint's in `types`, or the tensor type the
// schema spells out; nothing when it is neither.
template <size_t N>
constexpr std::optional<ONNXTensorElementDataType> element_type_of(std::string_view type,
                                                                   const TypeOf (&types)[N]) {
  constexpr TypeOf kTensorTypes[] = {{"tensor(float)", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT},
                                     {"tensor(int32)", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32},
                                     {"tensor(int64)", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64}};
  for (const TypeOf& t : types)
    if (t.constraint == type) return t.type;
  for (const TypeOf& t : kTensorTypes)
    if (t.constraint == type) return t.type;
  return std::nullopt;
}

template <class Kernel>
constexpr bool every_slot_typed() {
  using Schema = typename Kernel::Schema;
  for (const schema::Param& p : Schema::kInputs)
    if (!element_type_of(p.type, Kernel::kTypes)) return false;
  for (const schema::Param& p : Schema::kOutputs)
    if (!element_type_of(p.type, Kernel::kTypes)) return false;
  return true;
}

// An output that shares its input's buffer, for ops that update in place (a Signature's kAliases).
struct Alias {
  schema::InputIndex input;
  schema::OutputIndex output;
};

// A present input: its shape and data.
template <class T>
struct Input {
  Shape shape;
  const storage_t<T>* data = nullptr;
};

class Io {
 public:
  Io(OrtKernelContext* ctx, const schema::Param* outputs) : raw_(ctx), ctx_(ctx), outputs_(outputs) {}

  // An input of an element type known only at run time (int32 or int64 indices, say).
  struct Untyped {
    Shape shape;
    ONNXTensorElementDataType type;
    const void* data;
  };
  // A required input: present, as Entry checks before the kernel runs.
  Untyped untyped_input(schema::RequiredInput i) const {
    const Ort::ConstValue value = ctx_.GetInput(i.index);
    const auto info = value.GetTensorTypeAndShapeInfo();
    return Untyped{info.GetShape(), info.GetElementType(), value.GetTensorRawData()};
  }
  // An optional input, or nothing when the node leaves the slot out or passes "".
  std::optional<Untyped> untyped_input(schema::OptionalInput i) const {
    if (!has_input(i.index)) return std::nullopt;
    return untyped_input(schema::RequiredInput{i});
  }

  template <class T>
  Input<T> input(schema::RequiredInput i) const {
    return typed<T>(untyped_input(i));
  }
  template <class T>
  std::optional<Input<T>> input(schema::OptionalInput i) const {
    const auto value = untyped_input(i);
    if (!value) return std::nullopt;
    return typed<T>(*value);
  }

  bool has_input(size_t i) const { return i < ctx_.GetInputCount() && ctx_.GetInput(i) != nullptr; }

  // Output i allocated with `shape`; null when the node does not take an optional output, an
  // error when it leaves out a required one.
  Ort::UnownedValue output_value(schema::OutputIndex o, const Shape& shape) const {
    const size_t i = o.index;
    Ort::UnownedValue value =
        i < ctx_.GetOutputCount() ? ctx_.GetOutput(i, shape) : Ort::UnownedValue(nullptr);
    if (value == nullptr && !outputs_[i].optional) {
      throw Ort::Exception(std::string("output '") + outputs_[i].name + "' is required",
                           ORT_INVALID_ARGUMENT);
    }
    return value;
  }

  // A required output's data (null for an empty tensor); an optional one's through output_value,
  // which tells whether the node takes it.
  template <class T>
  storage_t<T>* output(schema::RequiredOutput i, const Shape& shape) const {
    return data<T>(output_value(i, shape));
  }

  template <class T>
  static storage_t<T>* data(Ort::UnownedValue value) {
    return value == nullptr ? nullptr : reinterpret_cast<storage_t<T>*>(value.GetTensorMutableRawData());
  }

  Parallel parallel() const { return parallel_of(raw_); }

  // The execution provider's compute stream (an aclrtStream under CANN; null on the CPU).
  void* stream() const { return ctx_.GetGPUComputeStream(); }

 private:
  template <class T>
  static Input<T> typed(const Untyped& value) {
    return Input<T>{value.shape, static_cast<const storage_t<T>*>(value.data)};
  }

  OrtKernelContext* raw_;
  Ort::KernelContext ctx_;
  const schema::Param* outputs_;
};

// What every op's Signature may declare besides its Schema, kName and kTypes, here with its
// default: a Kernel<types...> outside the types the op takes (registered so that it gets an error
// naming them) sets kTypesAllowed false and returns that error from type_error(); kHostInputs
// lists the inputs the kernel reads on the host (a scalar such as a step count: in CPU memory on
// every execution provider), kAliases its outputs that update an input in place.
struct Signature {
  static constexpr bool kTypesAllowed = true;
  static constexpr std::array<schema::InputIndex, 0> kHostInputs{};
  static constexpr std::array<Alias, 0> kAliases{};
};

// Every kernel's opening behind ORT's C entry point: required inputs checked, the types, then the
// op's inputs read into its Args and checked against the contract (Kernel::read), and only then
// Kernel::run; exceptions turned into an error status.
template <class Kernel>
struct Entry : Kernel {
  using Kernel::Kernel;
  OrtStatusPtr ComputeV2(OrtKernelContext* ctx) {
    using Schema = typename Kernel::Schema;
    return guarded(Kernel::kName,
                   [&] {
                     const Io io(ctx, Schema::kOutputs);
                     for (size_t i = 0; i < std::size(Schema::kInputs); ++i) {
                       if (!Schema::kInputs[i].optional && !io.has_input(i)) {
                         return op_error(Kernel::kName,
                                         std::string("input '") + Schema::kInputs[i].name + "' is required");
                       }
                     }
                     if constexpr (!Kernel::kTypesAllowed) {
                       return Kernel::type_error();
                     } else {
                       typename Kernel::Args args;
                       if (auto status = Kernel::read(io, args); !status.IsOK()) return status;
                       return Kernel::run(io, args);
                     }
                   })
        .release();
  }
};

// An op whose Kernel provides its Schema (ort/schema.h), kName, kTypes (and what Signature
// defaults), a constructor from the OrtKernelInfo, its Args, `Ort::Status read(const Io&, Args&)`
// and `Ort::Status run(const Io&, Args&)`.
template <class Kernel>
struct DeclaredOp : Ort::CustomOpBase<DeclaredOp<Kernel>, Entry<Kernel>, true> {
  using Schema = typename Kernel::Schema;
  static_assert(every_slot_typed<Kernel>(),
                "a type of the op's schema (a type constraint's name, or a tensor type) is not in the "
                "Signature's kTypes");

  explicit DeclaredOp(const char* ep) : ep_(ep) {
    if constexpr (std::size(Kernel::kAliases) > 0) {
      // ORT (C API 18 on) makes each such output the input's own buffer, a graph input's
      // included, so the kernel writes the update where the caller's value lives.
      OrtCustomOp::GetAliasMap = [](int** inputs, int** outputs) -> size_t {
        constexpr size_t n = std::size(Kernel::kAliases);
        *inputs = new int[n];
        *outputs = new int[n];
        for (size_t i = 0; i < n; ++i) {
          (*inputs)[i] = static_cast<int>(Kernel::kAliases[i].input.index);
          (*outputs)[i] = static_cast<int>(Kernel::kAliases[i].output.index);
        }
        return n;
      };
      OrtCustomOp::ReleaseAliasMap = [](int* inputs, int* outputs) {
        delete[] inputs;
        delete[] outputs;
      };
    }
  }
  // A bad attribute fails here, when the session is created.
  OrtStatusPtr CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const {
    return guarded(Kernel::kName,
                   [&] {
                     *kernel = new Entry<Kernel>(info);
                     return Ort::Status(nullptr);
                   })
        .release();
  }
  const char* GetName() const { return Kernel::kName; }
  const char* GetExecutionProviderType() const { return ep_; }
  size_t GetInputTypeCount() const { return std::size(Schema::kInputs); }
  ONNXTensorElementDataType GetInputType(size_t i) const { return type(Schema::kInputs[i]); }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t i) const {
    return characteristic(Schema::kInputs[i]);
  }
  OrtMemType GetInputMemoryType(size_t i) const {
    for (const schema::InputIndex host : Kernel::kHostInputs)
      if (host.index == i) return OrtMemTypeCPUInput;
    return OrtMemTypeDefault;
  }
  size_t GetOutputTypeCount() const { return std::size(Schema::kOutputs); }
  ONNXTensorElementDataType GetOutputType(size_t i) const { return type(Schema::kOutputs[i]); }
  OrtCustomOpInputOutputCharacteristic GetOutputCharacteristic(size_t i) const {
    return characteristic(Schema::kOutputs[i]);
  }

 private:
  static ONNXTensorElementDataType type(const schema::Param& slot) {
    return *element_type_of(slot.type, Kernel::kTypes);
  }
  static OrtCustomOpInputOutputCharacteristic characteristic(const schema::Param& slot) {
    return slot.optional ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL
                         : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED;
  }
  const char* ep_;
};

template <class Kernel>
void add_op(OpList& ops, const char* ep) {
  ops.push_back(std::make_shared<DeclaredOp<Kernel>>(ep));
}

// Registers Kernel<T> for T in float32, float16, bfloat16 on execution provider `ep`. (Kernel templates of
// different ops need different names: same-named templates in anonymous namespaces of two files mangle alike
// here, and the linker keeps one instantiation of this function for both.)
template <template <class> class Kernel>
void add_float_types(OpList& ops, const char* ep) {
  add_op<Kernel<float>>(ops, ep);
  add_op<Kernel<Ort::Float16_t>>(ops, ep);
  add_op<Kernel<Ort::BFloat16_t>>(ops, ep);
}

// Registers Kernel<A, B> for A, B in {float32, float16, bfloat16}: a pair outside the op's table
// then gets its error naming the types (type_error) instead of ORT's "no kernel def matches".
template <template <class, class> class Kernel>
void add_all_pairs(OpList& ops, const char* ep) {
  using F16 = Ort::Float16_t;
  using BF16 = Ort::BFloat16_t;
  add_op<Kernel<float, float>>(ops, ep), add_op<Kernel<float, F16>>(ops, ep);
  add_op<Kernel<float, BF16>>(ops, ep), add_op<Kernel<F16, float>>(ops, ep);
  add_op<Kernel<F16, F16>>(ops, ep), add_op<Kernel<F16, BF16>>(ops, ep);
  add_op<Kernel<BF16, float>>(ops, ep), add_op<Kernel<BF16, F16>>(ops, ep);
  add_op<Kernel<BF16, BF16>>(ops, ep);
}

}  // namespace oao
