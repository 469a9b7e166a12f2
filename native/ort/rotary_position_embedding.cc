#include "kernels/rotary_position_embedding.h"

#include "ort/ops.h"
#include "ort/rope_shapes.h"

namespace oao {
namespace {

constexpr const char* kOp = "RotaryPositionEmbedding";

template <class T>
struct RopeKernel {
  RopeKernel(const OrtApi*, const OrtKernelInfo* info) : mode(int_attribute(info, "mode", 0)) {}

  Ort::Status Compute(OrtKernelContext* ctx, const Tensor<T>& x, const Tensor<T>& cos, const Tensor<T>& sin,
                      Tensor<T>& y) {
    return guarded(kOp, [&] {
      if (auto status = check_rope(kOp, "x", x.Shape(), cos.Shape(), sin.Shape(), mode); !status.IsOK()) {
        return status;
      }
      rotary_position_embedding(data_of(x), data_of(cos), data_of(sin), allocate(y, x.Shape()), x.Shape(),
                                cos.Shape(), static_cast<int>(mode), parallel_of(ctx));
      return Ort::Status(nullptr);
    });
  }

  int64_t mode;
};

template <class T>
void add(OpList& ops) {
  ops.emplace_back(Ort::Custom::CreateLiteCustomOp<RopeKernel<T>>(kOp, kCpu));
}

}  // namespace

void add_rotary_position_embedding_cpu(OpList& ops) {
  add<float>(ops);
  add<Ort::Float16_t>(ops);
  add<Ort::BFloat16_t>(ops);
}

}  // namespace oao
