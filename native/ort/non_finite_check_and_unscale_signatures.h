// What NonFiniteCheckAndUnscale looks like to ONNX Runtime on every execution provider: slots
// (found_inf and inv_scale read on the host), the output that aliases the gradients it unscales,
// and the contract's rules.
#pragma once

#include "ort/io.h"

namespace oao {

template <class T>
struct NonFiniteCheckAndUnscaleSignature : Signature {
  static constexpr const char* kName = "NonFiniteCheckAndUnscale";
  static constexpr Slot kInputs[] = {{"scaled_grads", element_type<T>()},
                                     {"found_inf", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, false, true},
                                     {"inv_scale", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, false, true}};
  static constexpr Slot kOutputs[] = {{"grads_out", element_type<T>()},
                                      {"found_inf_out", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT}};
  // found_inf is a host input and found_inf_out lives on the device: only the gradients alias.
  static constexpr Alias kAliases[] = {{0, 0}};

  explicit NonFiniteCheckAndUnscaleSignature(const OrtKernelInfo*) {}

  struct Args {
    Input<T> grads;
    Shape found_inf_shape;
    float found_inf, inv_scale;
  };
  // The inputs, checked against the contract.
  static Ort::Status read(const Io& io, Args& a) {
    a.grads = *io.input<T>(0);
    const std::pair<const char*, float*> scalars[] = {{"found_inf", &a.found_inf}, {"inv_scale", &a.inv_scale}};
    for (size_t i = 0; i < 2; ++i) {
      const Input<float> value = *io.input<float>(i + 1);
      if (element_count(value.shape) != 1) {
        return op_error(kName, std::string("input '") + scalars[i].first + "' has shape " + shape_str(value.shape) +
                                   "; it must hold one value");
      }
      *scalars[i].second = *value.data;
      if (i == 0) a.found_inf_shape = value.shape;
    }
    return Ort::Status(nullptr);
  }
};

}  // namespace oao
