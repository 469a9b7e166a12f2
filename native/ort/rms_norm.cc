#include "kernels/rms_norm.h"

#include "ort/ops.h"
#include "ort/rms_norm_shapes.h"

namespace oao {
namespace {

constexpr const char* kOp = "RmsNorm";

template <class T, class TG>
struct RmsNormKernel {
  RmsNormKernel(const OrtApi*, const OrtKernelInfo* info)
      : epsilon(float_attribute(info, "epsilon", 1e-6f)) {}

  Ort::Status Compute(OrtKernelContext* ctx, const Tensor<T>& x, const Tensor<TG>& gamma, Tensor<T>& y,
                      Tensor<float>& rstd) {
    if constexpr (!allowed_pair<T, TG>()) {
      return pair_error<T, TG>(kOp);
    } else {
      return guarded(kOp, [&] {
        NormGeometry g;
        if (auto status = norm_geometry(kOp, x.Shape(), gamma.Shape(), g); !status.IsOK()) return status;
        auto* y_data = allocate(y, x.Shape());
        auto* rstd_data = rstd.Allocate(rstd_shape(x.Shape(), g.n));
        rms_norm(data_of(x), data_of(gamma), epsilon, y_data, rstd_data, g.rows, g.cols, parallel_of(ctx));
        return Ort::Status(nullptr);
      });
    }
  }

  float epsilon;
};

template <class T, class TG>
struct AddRmsNorm {
  void operator()(OpList& ops) {
    ops.emplace_back(Ort::Custom::CreateLiteCustomOp<RmsNormKernel<T, TG>>(kOp, kCpu));
  }
};

}  // namespace

void add_rms_norm_cpu(OpList& ops) { add_all_pairs<AddRmsNorm>(ops); }

}  // namespace oao
