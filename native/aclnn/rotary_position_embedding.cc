#include "aclnn/call.h"
#include "aclnn/rotary_position_embedding_limits.h"
#include "ort/ops.h"
#include "ort/rotary_position_embedding_signatures.h"

namespace oao {
namespace {

template <class T>
struct RotaryPositionEmbeddingAclnn : AclnnKernel<RotaryPositionEmbeddingSignature<T>> {
  using AclnnKernel<RotaryPositionEmbeddingSignature<T>>::AclnnKernel;
  using typename AclnnKernel<RotaryPositionEmbeddingSignature<T>>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    const RotaryPositionEmbeddingCall limits{this->kName, "x", false, false,
                                             std::is_same_v<T, Ort::BFloat16_t>};
    const bool through_half = rope_through_half_mode(call.cann().family(), this->mode);
    const int64_t mode = through_half ? 0 : this->mode;
    if (auto status = check_rope_product(limits, call.cann().family(), a.x.shape, a.cos.shape, mode);
        !status.IsOK())
      return status;
    auto* y = io.output<T>(schema::RotaryPositionEmbedding::kOutput_y, a.x.shape);
    constexpr aclDataType type = acl_type<T>();
    const void* x = a.x.data;
    if (through_half && element_count(a.x.shape) > 0) {
      void* deinterleaved = call.scratch(element_count(a.x.shape) * sizeof(T));
      if (auto status = rope_permute_last_axis(call, x, deinterleaved, a.x.shape, type, true); !status.IsOK())
        return status;
      x = deinterleaved;
    }
    return call.run<acl::RotaryPositionEmbeddingPrepare>(
        "aclnnRotaryPositionEmbedding", call.tensor(x, a.x.shape, type),
        call.tensor(a.cos.data, a.cos.shape, type), call.tensor(a.sin.data, a.sin.shape, type), mode,
        call.tensor(y, a.x.shape, type));
  }
};

}  // namespace

void add_rotary_position_embedding_aclnn(OpList& ops) {
  add_float_types<RotaryPositionEmbeddingAclnn>(ops, kAclnnEp);
}

}  // namespace oao
