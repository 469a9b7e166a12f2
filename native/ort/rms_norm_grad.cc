#include "kernels/rms_norm_grad.h"

#include "ort/ops.h"
#include "ort/rms_norm_shapes.h"

namespace oao {
namespace {

constexpr const char* kOp = "RmsNormGrad";

Ort::Status check_inputs(const Shape& dy, const Shape& x, const Shape& rstd, const Shape& gamma,
                         NormGeometry& g) {
  if (auto status = norm_geometry(kOp, x, gamma, g); !status.IsOK()) return status;
  if (dy != x) {
    return op_error(kOp,
                    "input 'dy' has shape " + shape_str(dy) + " but must equal x's shape " + shape_str(x));
  }
  // Equal to x's leading axes up to size-1 axes ([B,S,1], [B,S], [B,1,S], ...). A flattened [B*S]
  // is refused: the contract asks for the rows' own axes.
  const Shape lead(x.begin(), x.begin() + g.n);
  if (without_ones(rstd) != without_ones(lead)) {
    return op_error(kOp, "input 'rstd' has shape " + shape_str(rstd) +
                             "; it must hold one value per row, shaped " + shape_str(rstd_shape(x, g.n)) +
                             " or " + shape_str(lead) + " (size-1 axes may be added or dropped)");
  }
  return Ort::Status(nullptr);
}

template <class T, class TG>
struct RmsNormGradKernel {
  static constexpr const char* kName = kOp;
  static constexpr Slot kInputs[] = {{"dy", element_type<T>()},
                                     {"x", element_type<T>()},
                                     {"rstd", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT},
                                     {"gamma", element_type<TG>()}};
  static constexpr Slot kOutputs[] = {{"dx", element_type<T>()},
                                      {"dgamma", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT}};

  explicit RmsNormGradKernel(const OrtKernelInfo*) {}

  Ort::Status Compute(const Io& io) const {
    if constexpr (!allowed_pair<T, TG>()) {
      return pair_error<T, TG>(kOp);
    } else {
      const auto dy = *io.input<T>(0), x = *io.input<T>(1);
      const auto rstd = *io.input<float>(2);
      const auto gamma = *io.input<TG>(3);
      NormGeometry g;
      if (auto status = check_inputs(dy.shape, x.shape, rstd.shape, gamma.shape, g); !status.IsOK())
        return status;
      auto* dx = io.output<T>(0, x.shape);
      auto* dgamma = io.output<float>(1, gamma.shape);
      rms_norm_grad(dy.data, x.data, rstd.data, gamma.data, dx, dgamma, g.rows, g.cols, io.parallel());
      return Ort::Status(nullptr);
    }
  }
};

}  // namespace

void add_rms_norm_grad_cpu(OpList& ops) { add_all_pairs<RmsNormGradKernel>(ops); }

}  // namespace oao
