#include "aclnn/call.h"
#include "aclnn/rotary_position_embedding_limits.h"
#include "ort/ops.h"
#include "ort/rotary_position_embedding_signatures.h"

namespace oao {
namespace {

template <class T>
struct RotaryPositionEmbeddingGradAclnn : AclnnKernel<RotaryPositionEmbeddingGradSignature<T>> {
  using AclnnKernel<RotaryPositionEmbeddingGradSignature<T>>::AclnnKernel;
  using typename AclnnKernel<RotaryPositionEmbeddingGradSignature<T>>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    typename RotaryPositionEmbeddingGradSignature<T>::Outputs o;
    if (auto status = this->outputs(io, a, o); !status.IsOK()) return status;
    const RotaryPositionEmbeddingCall limits{this->kName, "dy", true, o.sums,
                                             std::is_same_v<T, Ort::BFloat16_t>};
    if (auto status = check_rope_product(limits, call.cann().family(), a.dy.shape, a.cos.shape, this->mode);
        !status.IsOK())
      return status;
    constexpr aclDataType type = acl_type<T>();
    // With x, aclnn computes both sums; one the node does not take goes to scratch.
    const size_t sum_bytes = element_count(a.cos.shape) * sizeof(T);
    void* dcos_or_scratch = !o.sums || o.dcos ? static_cast<void*>(o.dcos) : call.scratch(sum_bytes);
    void* dsin_or_scratch = !o.sums || o.dsin ? static_cast<void*>(o.dsin) : call.scratch(sum_bytes);
    return call.run<acl::RotaryPositionEmbeddingGradPrepare>(
        "aclnnRotaryPositionEmbeddingGrad", call.tensor(a.dy.data, a.dy.shape, type),
        call.tensor(a.cos.data, a.cos.shape, type), call.tensor(a.sin.data, a.sin.shape, type),
        o.sums ? call.tensor(a.x->data, a.x->shape, type) : nullptr, this->mode,
        call.tensor(o.dx, a.dy.shape, type),
        o.sums ? call.tensor(dcos_or_scratch, a.cos.shape, type) : nullptr,
        o.sums ? call.tensor(dsin_or_scratch, a.cos.shape, type) : nullptr);
  }
};

}  // namespace

void add_rotary_position_embedding_grad_aclnn(OpList& ops) { add_float_types<RotaryPositionEmbeddingGradAclnn>(ops, kAclnnEp); }

}  // namespace oao
