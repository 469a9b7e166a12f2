// What NonFiniteCheckAndUnscale looks like to ONNX Runtime on every execution provider: slot types
// (found_inf and inv_scale read on the host), the output that aliases the gradients it unscales,
// and the contract's rules.
#pragma once

#include "ort/io.h"

namespace oao {

template <class T>
struct NonFiniteCheckAndUnscaleSignature : Signature {
  using Schema = schema::NonFiniteCheckAndUnscale;
  static constexpr const char* kName = Schema::kName;
  static constexpr TypeOf kTypes[] = {{"T", element_type<T>()}};
  static constexpr schema::InputIndex kHostInputs[] = {Schema::kInput_found_inf, Schema::kInput_inv_scale};
  // found_inf is a host input and found_inf_out lives on the device: only the gradients alias.
  static constexpr Alias kAliases[] = {{Schema::kInput_scaled_grads, Schema::kOutput_grads_out}};

  explicit NonFiniteCheckAndUnscaleSignature(const OrtKernelInfo*) {}

  struct Args {
    Input<T> grads;
    Shape found_inf_shape;
    float found_inf, inv_scale;
  };
  // The inputs, checked against the contract.
  static Ort::Status read(const Io& io, Args& a) {
    a.grads = io.input<T>(Schema::kInput_scaled_grads);
    const std::pair<schema::RequiredInput, float*> scalars[] = {{Schema::kInput_found_inf, &a.found_inf},
                                                                {Schema::kInput_inv_scale, &a.inv_scale}};
    for (const auto& [slot, out] : scalars) {
      const Input<float> value = io.input<float>(slot);
      if (element_count(value.shape) != 1) {
        return op_error(kName, std::string("input '") + Schema::kInputs[slot.index].name + "' has shape " +
                                   shape_str(value.shape) + "; it must hold one value");
      }
      *out = *value.data;
      if (out == &a.found_inf) a.found_inf_shape = value.shape;
    }
    return Ort::Status(nullptr);
  }
};

}  // namespace oao
