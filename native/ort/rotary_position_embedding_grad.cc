#include "kernels/rotary_position_embedding_grad.h"

#include "ort/io.h"
#include "ort/ops.h"
#include "ort/rope_shapes.h"

namespace oao {
namespace {

template <class T>
struct RopeGradKernel {
  static constexpr const char* kName = "RotaryPositionEmbeddingGrad";
  static constexpr ONNXTensorElementDataType kT = element_type<T>();
  static constexpr Slot kInputs[] = {{kT}, {kT}, {kT}, {kT, true}};   // dy, cos, sin, x
  static constexpr Slot kOutputs[] = {{kT}, {kT, true}, {kT, true}};  // dx, dcos, dsin

  explicit RopeGradKernel(const OrtKernelInfo* info) : mode(int_attribute(info, "mode", 0)) {}

  Ort::Status Compute(const Io& io) const {
    const auto dy = *io.input<T>(0), cos = *io.input<T>(1), sin = *io.input<T>(2);
    const auto x = io.input<T>(3);
    if (auto status = check_rope(kName, "dy", dy.shape, cos.shape, sin.shape, mode); !status.IsOK())
      return status;
    if (x && x->shape != dy.shape) {
      return op_error(kName, "input 'x' has shape " + shape_str(x->shape) + " but must equal dy's shape " +
                                 shape_str(dy.shape));
    }
    auto* dx = io.output<T>(0, dy.shape);
    auto* dcos = io.output<T>(1, cos.shape);
    auto* dsin = io.output<T>(2, cos.shape);
    const bool sums = dcos != nullptr || dsin != nullptr;
    if (sums && !x)
      return op_error(kName, "outputs 'dcos' and 'dsin' need input 'x'; without x only dx is produced");
    // The kernel computes both sums together; one the node does not take goes to scratch.
    std::vector<storage_t<T>> scratch(sums && (dcos == nullptr || dsin == nullptr) ? element_count(cos.shape)
                                                                                   : 0);
    rotary_position_embedding_grad(dy.data, cos.data, sin.data, sums ? x->data : nullptr, dx,
                                   dcos ? dcos : scratch.data(), dsin ? dsin : scratch.data(), dy.shape,
                                   cos.shape, static_cast<int>(mode), io.parallel());
    return Ort::Status(nullptr);
  }

  int64_t mode;
};

template <class T>
void add(OpList& ops) {
  ops.push_back(std::make_shared<DeclaredOp<RopeGradKernel<T>>>());
}

}  // namespace

void add_rotary_position_embedding_grad_cpu(OpList& ops) {
  add<float>(ops);
  add<Ort::Float16_t>(ops);
  add<Ort::BFloat16_t>(ops);
}

}  // namespace oao
