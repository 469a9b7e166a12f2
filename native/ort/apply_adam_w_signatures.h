// What ApplyAdamW looks like to ONNX Runtime on every execution provider: slot types (step and lr
// read on the host), the outputs that alias the inputs they update, attributes and the contract's
// rules.
#pragma once

#include <cmath>

#include "kernels/apply_adam_w.h"
#include "ort/io.h"
#include "ort/schema.h"

namespace oao {

// One value of a host input of type float32 or int64 (step), as a double.
inline Ort::Status host_scalar(const char* op, const char* name, const Io::Untyped& value, double& out) {
  if (element_count(value.shape) != 1) {
    return op_error(op, std::string("input '") + name + "' has shape " + shape_str(value.shape) +
                            "; it must hold one value");
  }
  if (value.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) {
    out = static_cast<double>(*static_cast<const int64_t*>(value.data));
  } else if (value.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
    out = *static_cast<const float*>(value.data);
  } else {
    return op_error(op, std::string("input '") + name + "' must be int64 or float32");
  }
  return Ort::Status(nullptr);
}

template <class TP, class T>
struct ApplyAdamWSignature : Signature {
  using Schema = schema::ApplyAdamW;
  static constexpr const char* kName = Schema::kName;
  static constexpr bool kTypesAllowed = std::is_same_v<TP, T> || std::is_same_v<TP, float>;
  static Ort::Status type_error() {
    return op_error(kName, std::string("inputs 'param' (") + type_name<TP>() + ") and 'grad' (" + type_name<T>() +
                               ") are not an allowed (TP, T) pair; allowed: (float32, float32), (float32, "
                               "float16), (float32, bfloat16), (float16, float16), (bfloat16, bfloat16)");
  }
  static constexpr TypeOf kTypes[] = {{"TP", element_type<TP>()}, {"T", element_type<T>()}, {"TS", kAnyType}};
  static constexpr schema::InputIndex kHostInputs[] = {Schema::kInput_step, Schema::kInput_lr};
  static constexpr Alias kAliases[] = {{Schema::kInput_param, Schema::kOutput_param_out},
                                       {Schema::kInput_exp_avg, Schema::kOutput_exp_avg_out},
                                       {Schema::kInput_exp_avg_sq, Schema::kOutput_exp_avg_sq_out}};

  explicit ApplyAdamWSignature(const OrtKernelInfo* info)
      : beta1(attribute<float>(info, "beta1").value_or(Schema::kBeta1)),
        beta2(attribute<float>(info, "beta2").value_or(Schema::kBeta2)),
        weight_decay(attribute<float>(info, "weight_decay").value_or(Schema::kWeightDecay)),
        eps(attribute<float>(info, "eps").value_or(Schema::kEps)),
        maximize(attribute<int64_t>(info, "maximize").value_or(Schema::kMaximize)) {}

  struct Args {
    Input<TP> param, exp_avg, exp_avg_sq;
    Input<T> grad;
    double step, lr;  // as the inputs hold them (an int64 step exactly)
    AdamWScalars scalars;
  };
  // The inputs, checked against the contract.
  Ort::Status read(const Io& io, Args& a) const {
    if (auto error = choice_error("maximize", maximize, Schema::kMaximizeChoices); !error.empty())
      return op_error(kName, error);
    a.param = io.input<TP>(Schema::kInput_param);
    a.exp_avg = io.input<TP>(Schema::kInput_exp_avg);
    a.exp_avg_sq = io.input<TP>(Schema::kInput_exp_avg_sq);
    a.grad = io.input<T>(Schema::kInput_grad);
    const std::pair<const char*, const Shape*> others[] = {
        {"exp_avg", &a.exp_avg.shape}, {"exp_avg_sq", &a.exp_avg_sq.shape}, {"grad", &a.grad.shape}};
    for (const auto& [name, shape] : others) {
      if (*shape != a.param.shape) {
        return op_error(kName, std::string("input '") + name + "' has shape " + shape_str(*shape) +
                                   " but must have param's shape " + shape_str(a.param.shape));
      }
    }
    if (auto status = host_scalar(kName, "step", io.untyped_input(Schema::kInput_step), a.step);
        !status.IsOK())
      return status;
    if (auto status = host_scalar(kName, "lr", io.untyped_input(Schema::kInput_lr), a.lr); !status.IsOK())
      return status;
    if (!(a.step >= 1)) {
      return op_error(kName, "input 'step' is " + std::to_string(a.step) +
                                 "; it must be at least 1 (the first step is 1)");
    }
    a.scalars = adam_w_scalars(a.step, a.lr, beta1, beta2, weight_decay, eps, maximize == 1);
    return Ort::Status(nullptr);
  }

  float beta1, beta2, weight_decay, eps;
  int64_t maximize;
};

}  // namespace oao
