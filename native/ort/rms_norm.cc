#include "kernels/rms_norm.h"

#include "ort/ops.h"
#include "ort/rms_norm_shapes.h"

namespace oao {
namespace {

template <class T, class TG>
struct RmsNormKernel {
  static constexpr const char* kName = "RmsNorm";
  static constexpr Slot kInputs[] = {{"x", element_type<T>()}, {"gamma", element_type<TG>()}};
  static constexpr Slot kOutputs[] = {{"y", element_type<T>()},
                                      {"rstd", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT}};

  explicit RmsNormKernel(const OrtKernelInfo* info)
      : epsilon(attribute<float>(info, "epsilon").value_or(1e-6f)) {}

  Ort::Status Compute(const Io& io) const {
    if constexpr (!allowed_pair<T, TG>()) {
      return pair_error<T, TG>(kName);
    } else {
      const auto x = *io.input<T>(0);
      const auto gamma = *io.input<TG>(1);
      NormGeometry g;
      if (auto status = norm_geometry(kName, x.shape, gamma.shape, g); !status.IsOK()) return status;
      auto* y = io.output<T>(0, x.shape);
      auto* rstd = io.output<float>(1, rstd_shape(x.shape, g.n));
      rms_norm(x.data, gamma.data, epsilon, y, rstd, g.rows, g.cols, io.parallel());
      return Ort::Status(nullptr);
    }
  }

  float epsilon;
};

}  // namespace

void add_rms_norm_cpu(OpList& ops) { add_all_pairs<RmsNormKernel>(ops); }

}  // namespace oao
