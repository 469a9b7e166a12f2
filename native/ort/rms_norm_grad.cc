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
Ort::Status RmsNormGrad(OrtKernelContext* ctx, const Tensor<T>& dy, const Tensor<T>& x,
                        const Tensor<float>& rstd, const Tensor<TG>& gamma, Tensor<T>& dx,
                        Tensor<float>& dgamma) {
  if constexpr (!allowed_pair<T, TG>()) {
    return pair_error<T, TG>(kOp);
  } else {
    return guarded(kOp, [&] {
      NormGeometry g;
      if (auto status = check_inputs(dy.Shape(), x.Shape(), rstd.Shape(), gamma.Shape(), g); !status.IsOK()) {
        return status;
      }
      auto* dx_data = allocate(dx, x.Shape());
      auto* dgamma_data = dgamma.Allocate(gamma.Shape());
      rms_norm_grad(data_of(dy), data_of(x), rstd.Data(), data_of(gamma), dx_data, dgamma_data, g.rows,
                    g.cols, parallel_of(ctx));
      return Ort::Status(nullptr);
    });
  }
}

template <class T, class TG>
struct AddRmsNormGrad {
  void operator()(OpList& ops) {
    ops.emplace_back(Ort::Custom::CreateLiteCustomOp(kOp, kCpu, RmsNormGrad<T, TG>));
  }
};

}  // namespace

void add_rms_norm_grad_cpu(OpList& ops) { add_all_pairs<AddRmsNormGrad>(ops); }

}  // namespace oao
