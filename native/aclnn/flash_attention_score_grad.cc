#include "aclnn/flash_attention_score_limits.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct FlashAttentionScoreGradAclnn : AclnnKernel<FlashAttentionScoreGradSignature<T>> {
  using AclnnKernel<FlashAttentionScoreGradSignature<T>>::AclnnKernel;
  using typename AclnnKernel<FlashAttentionScoreGradSignature<T>>::Args;

  Ort::Status read(const Io& io, Args& a) const {
    if (auto status = check_fa_not_tnd(this->kName, this->tnd()); !status.IsOK()) return status;
    return FlashAttentionScoreGradSignature<T>::read(io, a);
  }

  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    if (auto status = check_fa_aclnn_limits(this->kName, call.cann().family(), a.g); !status.IsOK())
      return status;
    auto* dq = io.output<T>(0, a.query.shape);
    auto* dk = io.output<T>(1, a.key.shape);
    auto* dv = io.output<T>(2, a.value.shape);
    if (element_count(a.query.shape) == 0 || element_count(a.key.shape) == 0) {
      // No query rows or no key rows: nothing reaches any gradient; aclnn refuses empty tensors.
      const T zero{};
      fa_fill(call, dq, element_count(a.query.shape), &zero, sizeof zero);
      fa_fill(call, dk, element_count(a.key.shape), &zero, sizeof zero);
      fa_fill(call, dv, element_count(a.value.shape), &zero, sizeof zero);
      return Ort::Status(nullptr);
    }
    constexpr aclDataType type = acl_type<T>();
    const FaVendorMask m = fa_vendor_mask(call, *this, a);
    std::string layout = this->input_layout;  // aclnn takes char*
    return call.run<acl::FlashAttentionScoreGradPrepare>(
        "aclnnFlashAttentionScoreGrad", call.tensor(a.query.data, a.query.shape, type),
        call.tensor(a.key.data, a.key.shape, type), call.tensor(a.value.data, a.value.shape, type),
        call.tensor(a.dy.data, a.dy.shape, type), nullptr, nullptr, nullptr, m.mask,
        call.tensor(a.softmax_max.data, a.softmax_max.shape, ACL_FLOAT),
        call.tensor(a.softmax_sum.data, a.softmax_sum.shape, ACL_FLOAT), nullptr,
        call.tensor(a.attention_in.data, a.attention_in.shape, type), nullptr,
        static_cast<double>(this->scale_value), static_cast<double>(this->keep_prob), m.pre_tokens,
        m.next_tokens, *this->head_num, layout.data(), m.inner_precise, this->sparse_mode,
        call.tensor(dq, a.query.shape, type), call.tensor(dk, a.key.shape, type),
        call.tensor(dv, a.value.shape, type), nullptr);
  }
};

}  // namespace

void add_flash_attention_score_grad_aclnn(OpList& ops) {
  add_float_types<FlashAttentionScoreGradAclnn>(ops, kAclnnEp);
}

}  // namespace oao
