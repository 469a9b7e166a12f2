// Ops with optional inputs or outputs. The lite API builds a tensor for every slot below the
// node's input count and crashes on one the node passes as "" (an absent optional input), and
// hands out outputs the node does not take. These ops declare their slots to ORT here and read
// the kernel context themselves, through Io.
#pragma once

#include <iterator>
#include <optional>
#include <vector>

#include "ort/glue.h"

namespace oao {

// An input or output: its element type (UNDEFINED: any, checked by the kernel) and whether the
// node may leave it out.
struct Slot {
  ONNXTensorElementDataType type;
  bool optional = false;
};

// A present input: its shape and data.
template <class T>
struct Input {
  Shape shape;
  const storage_t<T>* data;
};

class Io {
 public:
  explicit Io(OrtKernelContext* ctx) : raw_(ctx), ctx_(ctx) {}

  // Input i, or nothing when the node leaves the slot out or passes "".
  template <class T>
  std::optional<Input<T>> input(size_t i) const {
    if (i >= ctx_.GetInputCount()) return std::nullopt;
    const Ort::ConstValue value = ctx_.GetInput(i);
    if (value == nullptr) return std::nullopt;
    return Input<T>{value.GetTensorTypeAndShapeInfo().GetShape(),
                    reinterpret_cast<const storage_t<T>*>(value.GetTensorRawData())};
  }

  // Input i of an element type known only at run time (int32 or int64 indices, say).
  struct Untyped {
    Shape shape;
    ONNXTensorElementDataType type;
    const void* data;
  };
  std::optional<Untyped> untyped_input(size_t i) const {
    if (i >= ctx_.GetInputCount()) return std::nullopt;
    const Ort::ConstValue value = ctx_.GetInput(i);
    if (value == nullptr) return std::nullopt;
    const auto info = value.GetTensorTypeAndShapeInfo();
    return Untyped{info.GetShape(), info.GetElementType(), value.GetTensorRawData()};
  }

  // Output i allocated with `shape`, or null when the node does not take it.
  template <class T>
  storage_t<T>* output(size_t i, const Shape& shape) const {
    if (i >= ctx_.GetOutputCount()) return nullptr;
    Ort::UnownedValue value = ctx_.GetOutput(i, shape);
    return value == nullptr ? nullptr : reinterpret_cast<storage_t<T>*>(value.GetTensorMutableRawData());
  }

  Parallel parallel() const { return parallel_of(raw_); }

 private:
  OrtKernelContext* raw_;
  Ort::KernelContext ctx_;
};

// Kernel::Compute behind ORT's C entry point, exceptions turned into an error status.
template <class Kernel>
struct Entry : Kernel {
  using Kernel::Kernel;
  OrtStatusPtr ComputeV2(OrtKernelContext* ctx) {
    return guarded(Kernel::kName, [&] { return Kernel::Compute(Io(ctx)); }).release();
  }
};

// An op whose Kernel provides kName, kInputs and kOutputs (Slot arrays), a constructor from the
// OrtKernelInfo, and `Ort::Status Compute(const Io&)`.
template <class Kernel>
struct DeclaredOp : Ort::CustomOpBase<DeclaredOp<Kernel>, Entry<Kernel>, true> {
  OrtStatusPtr CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const {
    *kernel = new Entry<Kernel>(info);
    return nullptr;
  }
  const char* GetName() const { return Kernel::kName; }
  const char* GetExecutionProviderType() const { return kCpu; }
  size_t GetInputTypeCount() const { return std::size(Kernel::kInputs); }
  ONNXTensorElementDataType GetInputType(size_t i) const { return Kernel::kInputs[i].type; }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t i) const {
    return characteristic(Kernel::kInputs[i]);
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
};

}  // namespace oao
