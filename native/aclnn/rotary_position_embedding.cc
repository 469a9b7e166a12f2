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
    const RotaryPositionEmbeddingCall limits{this->kName, "x", false, false, std::is_same_v<T, Ort::BFloat16_t>};
    if (auto status = check_rope_product(limits, call.cann().family(), a.x.shape, a.cos.shape, this->mode);
        !status.IsOK())
      return status;
    auto* y = io.output<T>(schema::RotaryPositionEmbedding::kOutput_y, a.x.shape);
    constexpr aclDataType type = acl_type<T>();
    return call.run<acl::RotaryPositionEmbeddingPrepare>(
        "aclnnRotaryPositionEmbedding", call.tensor(a.x.data, a.x.shape, type),
        call.tensor(a.cos.data, a.cos.shape, type), call.tensor(a.sin.data, a.sin.shape, type), this->mode,
        call.tensor(y, a.x.shape, type));
  }
};

}  // namespace

void add_rotary_position_embedding_aclnn(OpList& ops) { add_float_types<RotaryPositionEmbeddingAclnn>(ops, kAclnnEp); }

}  // namespace oao
