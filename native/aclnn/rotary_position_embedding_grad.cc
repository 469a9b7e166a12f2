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
    bool through_half = rope_through_half_mode(call.cann().family(), this->mode);
    const int64_t mode = through_half ? 0 : this->mode;
    if (auto status = check_rope_product(limits, call.cann().family(), a.dy.shape, a.cos.shape, mode);
        !status.IsOK())
      return status;
    constexpr aclDataType type = acl_type<T>();
    // With x, aclnn computes both sums; one the node does not take goes to scratch.
    const size_t sum_bytes = element_count(a.cos.shape) * sizeof(T);
    void* dcos_or_scratch = !o.sums || o.dcos ? static_cast<void*>(o.dcos) : call.scratch(sum_bytes);
    void* dsin_or_scratch = !o.sums || o.dsin ? static_cast<void*>(o.dsin) : call.scratch(sum_bytes);
    // Through mode 0: x de-interleaved, and dx computed de-interleaved, then interleaved back.
    const size_t data_bytes = element_count(a.dy.shape) * sizeof(T);
    through_half = through_half && data_bytes > 0;
    const void* x = o.sums ? a.x->data : nullptr;
    if (through_half && o.sums) {
      void* deinterleaved = call.scratch(data_bytes);
      if (auto status = rope_permute_last_axis(call, x, deinterleaved, a.dy.shape, type, true);
          !status.IsOK())
        return status;
      x = deinterleaved;
    }
    void* dx = through_half ? call.scratch(data_bytes) : o.dx;
    auto status = call.run<acl::RotaryPositionEmbeddingGradPrepare>(
        "aclnnRotaryPositionEmbeddingGrad", call.tensor(a.dy.data, a.dy.shape, type),
        call.tensor(a.cos.data, a.cos.shape, type), call.tensor(a.sin.data, a.sin.shape, type),
        o.sums ? call.tensor(x, a.dy.shape, type) : nullptr, mode, call.tensor(dx, a.dy.shape, type),
        o.sums ? call.tensor(dcos_or_scratch, a.cos.shape, type) : nullptr,
        o.sums ? call.tensor(dsin_or_scratch, a.cos.shape, type) : nullptr);
    if (!status.IsOK() || !through_half) return status;
    return rope_permute_last_axis(call, dx, o.dx, a.dy.shape, type, false);
  }
};

}  // namespace

void add_rotary_position_embedding_grad_aclnn(OpList& ops) {
  add_float_types<RotaryPositionEmbeddingGradAclnn>(ops, kAclnnEp);
}

}  // namespace oao
