#include "aclnn/flash_attention_score_limits.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct FlashAttentionScoreGradAclnn : AclnnKernel<FlashAttentionScoreGradSignature<T>> {
  using AclnnKernel<FlashAttentionScoreGradSignature<T>>::AclnnKernel;
  using typename AclnnKernel<FlashAttentionScoreGradSignature<T>>::Args;

  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    if (auto status = check_fa_aclnn_limits(this->kName, call.cann().family(), a.g); !status.IsOK())
      return status;
    auto* dq = io.output<T>(schema::FlashAttentionScoreGrad::kOutput_dq, a.query.shape);
    auto* dk = io.output<T>(schema::FlashAttentionScoreGrad::kOutput_dk, a.key.shape);
    auto* dv = io.output<T>(schema::FlashAttentionScoreGrad::kOutput_dv, a.value.shape);
    if (element_count(a.query.shape) == 0 || element_count(a.key.shape) == 0) {
      // No query rows or no key rows: nothing reaches any gradient; aclnn refuses empty tensors.
      const T zero{};
      fa_fill(call, dq, element_count(a.query.shape), &zero, sizeof zero);
      fa_fill(call, dk, element_count(a.key.shape), &zero, sizeof zero);
      fa_fill(call, dv, element_count(a.value.shape), &zero, sizeof zero);
      return Ort::Status(nullptr);
    }
    // TND's limits are the vendor's, so they hold only where it is called.
    if (auto status = check_fa_varlen_limits(this->kName, a.g, this->sparse_mode, true); !status.IsOK())
      return status;
    constexpr aclDataType type = acl_type<T>();
    const FaVendorMask m = fa_vendor_mask(call, *this, a);
    std::string layout = this->input_layout;  // aclnn takes char*
    const aclTensor* query = call.tensor(a.query.data, a.query.shape, type);
    const aclTensor* key = call.tensor(a.key.data, a.key.shape, type);
    const aclTensor* value = call.tensor(a.value.data, a.value.shape, type);
    const aclTensor* dy = call.tensor(a.dy.data, a.dy.shape, type);
    const aclTensor* softmax_max = call.tensor(a.softmax_max.data, a.softmax_max.shape, ACL_FLOAT);
    const aclTensor* softmax_sum = call.tensor(a.softmax_sum.data, a.softmax_sum.shape, ACL_FLOAT);
    const aclTensor* attention_in = call.tensor(a.attention_in.data, a.attention_in.shape, type);
    const aclTensor* dq_out = call.tensor(dq, a.query.shape, type);
    const aclTensor* dk_out = call.tensor(dk, a.key.shape, type);
    const aclTensor* dv_out = call.tensor(dv, a.value.shape, type);
    const auto scale = static_cast<double>(this->scale_value), keep = static_cast<double>(this->keep_prob);
    if (this->tnd()) {
      // The same arguments with the cumulative lengths (read on the host) after prefixOptional.
      return call.run<acl::FlashAttentionUnpaddingScoreGradPrepare>(
          "aclnnFlashAttentionUnpaddingScoreGrad", query, key, value, dy, nullptr, nullptr, nullptr, m.mask,
          softmax_max, softmax_sum, nullptr, attention_in, nullptr, call.int_array(a.g.spans.query_end),
          call.int_array(a.g.spans.key_end), scale, keep, m.pre_tokens, m.next_tokens, *this->head_num,
          layout.data(), m.inner_precise, this->sparse_mode, dq_out, dk_out, dv_out, nullptr);
    }
    return call.run<acl::FlashAttentionScoreGradPrepare>(
        "aclnnFlashAttentionScoreGrad", query, key, value, dy, nullptr, nullptr, nullptr, m.mask, softmax_max,
        softmax_sum, nullptr, attention_in, nullptr, scale, keep, m.pre_tokens, m.next_tokens,
        *this->head_num, layout.data(), m.inner_precise, this->sparse_mode, dq_out, dk_out, dv_out, nullptr);
  }
};

}  // namespace

void add_flash_attention_score_grad_aclnn(OpList& ops) {
  add_float_types<FlashAttentionScoreGradAclnn>(ops, kAclnnEp);
}

}  // namespace oao
