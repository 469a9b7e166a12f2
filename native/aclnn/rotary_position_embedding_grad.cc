#include "aclnn/call.h"
#include "aclnn/rotary_position_embedding_limits.h"
#include "ort/ops.h"
#include "ort/rotary_position_embedding_signatures.h"

namespace oao {
namespace {

template <class T>
struct RotaryPositionEmbeddingGradAclnn : RotaryPositionEmbeddingGradSignature<T> {
  explicit RotaryPositionEmbeddingGradAclnn(const OrtKernelInfo* info)
      : RotaryPositionEmbeddingGradSignature<T>(info), allocator(device_allocator(info)) {}

  Ort::Status Compute(const Io& io) const {
    const auto dy = *io.input<T>(0), cos = *io.input<T>(1), sin = *io.input<T>(2);
    const auto x = io.input<T>(3);
    const std::optional<Shape> x_shape = x ? std::optional(x->shape) : std::nullopt;
    if (auto status = this->check(dy.shape, cos.shape, sin.shape, x_shape); !status.IsOK()) return status;
    AclnnCall call(this->kName, io, allocator.get());
    auto* dx = io.output<T>(0, dy.shape);
    const auto [dcos, dsin, sums] = this->sum_outputs(io, cos.shape);
    if (auto status = this->check_sums(sums, x.has_value()); !status.IsOK()) return status;
    const RotaryPositionEmbeddingCall limits{this->kName, "dy", true, sums, std::is_same_v<T, Ort::BFloat16_t>};
    if (auto status = check_rope_product(limits, call.cann().family(), dy.shape, cos.shape, this->mode);
        !status.IsOK())
      return status;
    constexpr aclDataType type = acl_type<T>();
    // With x, aclnn computes both sums; one the node does not take goes to scratch.
    const size_t sum_bytes = element_count(cos.shape) * sizeof(T);
    void* dcos_or_scratch = !sums || dcos ? static_cast<void*>(dcos) : call.scratch(sum_bytes);
    void* dsin_or_scratch = !sums || dsin ? static_cast<void*>(dsin) : call.scratch(sum_bytes);
    return call.run<acl::RotaryPositionEmbeddingGradPrepare>(
        "aclnnRotaryPositionEmbeddingGrad", call.tensor(dy.data, dy.shape, type),
        call.tensor(cos.data, cos.shape, type), call.tensor(sin.data, sin.shape, type),
        sums ? call.tensor(x->data, x->shape, type) : nullptr, this->mode, call.tensor(dx, dy.shape, type),
        sums ? call.tensor(dcos_or_scratch, cos.shape, type) : nullptr,
        sums ? call.tensor(dsin_or_scratch, cos.shape, type) : nullptr);
  }

  DeviceAllocator allocator;
};

}  // namespace

void add_rotary_position_embedding_grad_aclnn(OpList& ops) { add_float_types<RotaryPositionEmbeddingGradAclnn>(ops, kAclnnEp); }

}  // namespace oao
