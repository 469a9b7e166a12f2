#include "aclnn/call.h"
#include "aclnn/rotary_position_embedding_limits.h"
#include "ort/ops.h"
#include "ort/rotary_position_embedding_signatures.h"

namespace oao {
namespace {

template <class T>
struct RotaryPositionEmbeddingAclnn : RotaryPositionEmbeddingSignature<T> {
  explicit RotaryPositionEmbeddingAclnn(const OrtKernelInfo* info) : RotaryPositionEmbeddingSignature<T>(info), allocator(device_allocator(info)) {}

  Ort::Status Compute(const Io& io) const {
    const auto x = *io.input<T>(0), cos = *io.input<T>(1), sin = *io.input<T>(2);
    if (auto status = check_rotary_position_embedding(this->kName, "x", x.shape, cos.shape, sin.shape, this->mode); !status.IsOK())
      return status;
    AclnnCall call(this->kName, io, allocator.get());
    const RotaryPositionEmbeddingCall limits{this->kName, "x", false, false, std::is_same_v<T, Ort::BFloat16_t>};
    if (auto status = check_rope_product(limits, call.cann().family(), x.shape, cos.shape, this->mode);
        !status.IsOK())
      return status;
    auto* y = io.output<T>(0, x.shape);
    constexpr aclDataType type = acl_type<T>();
    return call.run<acl::RotaryPositionEmbeddingPrepare>("aclnnRotaryPositionEmbedding", call.tensor(x.data, x.shape, type),
                                      call.tensor(cos.data, cos.shape, type),
                                      call.tensor(sin.data, sin.shape, type), this->mode,
                                      call.tensor(y, x.shape, type));
  }

  DeviceAllocator allocator;
};

}  // namespace

void add_rotary_position_embedding_aclnn(OpList& ops) { add_float_types<RotaryPositionEmbeddingAclnn>(ops, kAclnnEp); }

}  // namespace oao
