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
  static constexpr Slot kInputs[] = {{"dy", kT}, {"cos", kT}, {"sin", kT}, {"x", kT, true}};
  static constexpr Slot kOutputs[] = {{"dx", kT}, {"dcos", kT, true}, {"dsin", kT, true}};

  explicit RopeGradKernel(const OrtKernelInfo* info) : mode(attribute<int64_t>(info, "mode").value_or(0)) {}

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

}  // namespace

void add_rotary_position_embedding_grad_cpu(OpList& ops) { add_float_types<RopeGradKernel>(ops); }

}  // namespace oao
