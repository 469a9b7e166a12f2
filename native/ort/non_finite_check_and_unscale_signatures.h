// What NonFiniteCheckAndUnscale looks like to ONNX Runtime on every execution provider: slot types,
// the output that aliases the gradients it unscales, and the contract's rules.
#pragma once

#include "ort/io.h"

namespace oao {

template <class T>
struct NonFiniteCheckAndUnscaleSignature : Signature {
  using Schema = schema::NonFiniteCheckAndUnscale;
  static constexpr const char* kName = Schema::kName;
  static constexpr TypeOf kTypes[] = {{"T", element_type<T>()}};
  // found_inf and inv_scale stay where the EP keeps tensors (device memory on the NPU, where the
  // vendor's function reads them), so that a loss scale kept on the device never crosses the bus.
  // Only the gradients alias: found_inf_out is a buffer of its own, so a caller may seed every run
  // from one zero that no run writes.
  static constexpr Alias kAliases[] = {{Schema::kInput_scaled_grads, Schema::kOutput_grads_out}};

  explicit NonFiniteCheckAndUnscaleSignature(const OrtKernelInfo*) {}

  struct Args {
    Input<T> grads;
    Input<float> found_inf, inv_scale;  // one value each, in the EP's memory
  };
  // The inputs, checked against the contract.
  static Ort::Status read(const Io& io, Args& a) {
    a.grads = io.input<T>(Schema::kInput_scaled_grads);
    const std::pair<schema::RequiredInput, Input<float>*> scalars[] = {
        {Schema::kInput_found_inf, &a.found_inf}, {Schema::kInput_inv_scale, &a.inv_scale}};
    for (const auto& [slot, out] : scalars) {
      *out = io.input<float>(slot);
      if (element_count(out->shape) != 1) {
        return op_error(kName, std::string("input '") + Schema::kInputs[slot.index].name + "' has shape " +
                                   shape_str(out->shape) + "; it must hold one value");
      }
    }
    return Ort::Status(nullptr);
  }
};

}  // namespace oao
