// How every op meets ONNX Runtime: it declares its slots (name, element type, optional) and reads
// the kernel context through Io. (ORT's lite API was the first choice, but it builds a tensor for
// every input slot and crashes on one the node passes as "", required or optional, and hands out
// outputs the node does not take; ORT does not check custom ops' required slots itself.)
#pragma once

#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "ort/glue.h"

namespace oao {

// An input or output: its name (for errors), element type (UNDEFINED: any, checked by the kernel),
// whether the node may leave it out, and for an input whether the kernel reads it on the host (a
// scalar such as a step count: in CPU memory on every execution provider).
struct Slot {
  const char* name;
  ONNXTensorElementDataType type;
  bool optional = false;
  bool host = false;
};

// (input, output) index pairs of outputs that share their input's buffer, for ops that update in
// place (a Signature's kAliases); none by default.
struct Alias {
  int input, output;
};
template <class Kernel, class = void>
struct AliasesOf {
  static constexpr size_t kCount = 0;
  static constexpr const Alias* kList = nullptr;
};
template <class Kernel>
struct AliasesOf<Kernel, std::void_t<decltype(Kernel::kAliases)>> {
  static constexpr size_t kCount = std::size(Kernel::kAliases);
  static constexpr const Alias* kList = Kernel::kAliases;
};

// A present input: its shape and data.
template <class T>
struct Input {
  Shape shape;
  const storage_t<T>* data = nullptr;
};

class Io {
 public:
  Io(OrtKernelContext* ctx, const char* op, const Slot* outputs)
      : raw_(ctx), ctx_(ctx), op_(op), outputs_(outputs) {}

  // Input i, or nothing when the node leaves the slot out or passes "" (required inputs are
  // checked before the kernel runs).
  template <class T>
  std::optional<Input<T>> input(size_t i) const {
    const auto value = untyped_input(i);
    if (!value) return std::nullopt;
    return Input<T>{value->shape, static_cast<const storage_t<T>*>(value->data)};
  }

  // Input i of an element type known only at run time (int32 or int64 indices, say).
  struct Untyped {
    Shape shape;
    ONNXTensorElementDataType type;
    const void* data;
  };
  std::optional<Untyped> untyped_input(size_t i) const {
    if (!has_input(i)) return std::nullopt;
    const Ort::ConstValue value = ctx_.GetInput(i);
    const auto info = value.GetTensorTypeAndShapeInfo();
    return Untyped{info.GetShape(), info.GetElementType(), value.GetTensorRawData()};
  }

  bool has_input(size_t i) const { return i < ctx_.GetInputCount() && ctx_.GetInput(i) != nullptr; }

  // Output i allocated with `shape`; null when the node does not take an optional output, an
  // error when it leaves out a required one.
  Ort::UnownedValue output_value(size_t i, const Shape& shape) const {
    Ort::UnownedValue value =
        i < ctx_.GetOutputCount() ? ctx_.GetOutput(i, shape) : Ort::UnownedValue(nullptr);
    if (value == nullptr && !outputs_[i].optional) {
      throw Ort::Exception(std::string("output '") + outputs_[i].name + "' is required",
                           ORT_INVALID_ARGUMENT);
    }
    return value;
  }

  // Output i's data (null for an empty tensor, so ask output_value whether the node takes it).
  template <class T>
  storage_t<T>* output(size_t i, const Shape& shape) const {
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
  OrtKernelContext* raw_;
  Ort::KernelContext ctx_;
  const char* op_;
  const Slot* outputs_;
};

// What every op's Signature declares besides its slots: a Kernel<types...> outside the types the
// op takes (registered so that it gets an error naming them) sets kTypesAllowed false and returns
// that error from type_error().
struct Signature {
  static constexpr bool kTypesAllowed = true;
};

// Every kernel's opening behind ORT's C entry point: required inputs checked, the types, then the
// op's inputs read into its Args and checked against the contract (Kernel::read), and only then
// Kernel::run; exceptions turned into an error status.
template <class Kernel>
struct Entry : Kernel {
  using Kernel::Kernel;
  OrtStatusPtr ComputeV2(OrtKernelContext* ctx) {
    return guarded(Kernel::kName,
                   [&] {
                     const Io io(ctx, Kernel::kName, Kernel::kOutputs);
                     for (size_t i = 0; i < std::size(Kernel::kInputs); ++i) {
                       if (!Kernel::kInputs[i].optional && !io.has_input(i)) {
                         return op_error(Kernel::kName,
                                         std::string("input '") + Kernel::kInputs[i].name + "' is required");
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

// An op whose Kernel provides kName, kInputs and kOutputs (Slot arrays), a constructor from the
// OrtKernelInfo, its Args, `Ort::Status read(const Io&, Args&)` and
// `Ort::Status run(const Io&, Args&)`.
template <class Kernel>
struct DeclaredOp : Ort::CustomOpBase<DeclaredOp<Kernel>, Entry<Kernel>, true> {
  explicit DeclaredOp(const char* ep) : ep_(ep) {
    if constexpr (AliasesOf<Kernel>::kCount > 0) {
      // ORT (C API 18 on) makes each such output the input's own buffer, a graph input's
      // included, so the kernel writes the update where the caller's value lives.
      OrtCustomOp::GetAliasMap = [](int** inputs, int** outputs) -> size_t {
        constexpr size_t n = AliasesOf<Kernel>::kCount;
        *inputs = new int[n];
        *outputs = new int[n];
        for (size_t i = 0; i < n; ++i) {
          (*inputs)[i] = AliasesOf<Kernel>::kList[i].input;
          (*outputs)[i] = AliasesOf<Kernel>::kList[i].output;
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
  size_t GetInputTypeCount() const { return std::size(Kernel::kInputs); }
  ONNXTensorElementDataType GetInputType(size_t i) const { return Kernel::kInputs[i].type; }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t i) const {
    return characteristic(Kernel::kInputs[i]);
  }
  OrtMemType GetInputMemoryType(size_t i) const {
    return Kernel::kInputs[i].host ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }
  size_t GetOutputTypeCount() const { return std::size(Kernel::kOutputs); }
  ONNXTensorElementDataType GetOutputType(size_t i) const { return Kernel::kOutputs[i].type; }
  OrtCustomOpInputOutputCharacteristic GetOutputCharacteristic(size_t i) const {
    return characteristic(Kernel::kOutputs[i]);
  }

 private:
  static OrtCustomOpInputOutputCharacteristic characteristic(const Slot& slot) {
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
