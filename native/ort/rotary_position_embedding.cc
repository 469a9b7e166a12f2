#include "kernels/rotary_position_embedding.h"

#include "ort/io.h"
#include "ort/ops.h"
#include "ort/rope_shapes.h"

namespace oao {
namespace {

template <class T>
struct RopeKernel {
  static constexpr const char* kName = "RotaryPositionEmbedding";
  static constexpr ONNXTensorElementDataType kT = element_type<T>();
  static constexpr Slot kInputs[] = {{"x", kT}, {"cos", kT}, {"sin", kT}};
  static constexpr Slot kOutputs[] = {{"y", kT}};

  explicit RopeKernel(const OrtKernelInfo* info) : mode(attribute<int64_t>(info, "mode").value_or(0)) {}

  Ort::Status Compute(const Io& io) const {
    const auto x = *io.input<T>(0), cos = *io.input<T>(1), sin = *io.input<T>(2);
    if (auto status = check_rope(kName, "x", x.shape, cos.shape, sin.shape, mode); !status.IsOK())
      return status;
    rotary_position_embedding(x.data, cos.data, sin.data, io.output<T>(0, x.shape), x.shape, cos.shape,
                              static_cast<int>(mode), io.parallel());
    return Ort::Status(nullptr);
  }

  int64_t mode;
};

}  // namespace

void add_rotary_position_embedding_cpu(OpList& ops) { add_float_types<RopeKernel>(ops); }

}  // namespace oao
