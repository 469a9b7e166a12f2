#include <limits>

#include "aclnn/flash_attention_score_limits.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct FlashAttentionScoreAclnn : AclnnKernel<FlashAttentionScoreSignature<T>> {
  using AclnnKernel<FlashAttentionScoreSignature<T>>::AclnnKernel;
  using typename AclnnKernel<FlashAttentionScoreSignature<T>>::Args;

  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    if (auto status = check_fa_aclnn_limits(this->kName, call.cann().family(), a.g); !status.IsOK())
      return status;
    auto* out = io.output<T>(schema::FlashAttentionScore::kOutput_attention_out, a.out_shape);
    auto* softmax_max = io.output<float>(schema::FlashAttentionScore::kOutput_softmax_max, a.stats_shape);
    auto* softmax_sum = io.output<float>(schema::FlashAttentionScore::kOutput_softmax_sum, a.stats_shape);
    const int64_t stats = element_count(a.stats_shape);
    if (stats == 0) return Ort::Status(nullptr);  // no query rows
    if (element_count(a.key.shape) == 0) {
      // No key rows: every row fully masked; aclnn refuses empty tensors.
      const T zero{};
      const float minus_inf = -std::numeric_limits<float>::infinity(), nothing = 0.0f;
      fa_fill(call, out, element_count(a.out_shape), &zero, sizeof zero);
      fa_fill(call, softmax_max, stats, &minus_inf, sizeof minus_inf);
      fa_fill(call, softmax_sum, stats, &nothing, sizeof nothing);
      return Ort::Status(nullptr);
    }
    // TND's limits are the vendor's, so they hold only where it is called.
    if (auto status = check_fa_varlen_limits(this->kName, a.g, this->sparse_mode, false); !status.IsOK())
      return status;
    constexpr aclDataType type = acl_type<T>();
    const FaVendorMask m = fa_vendor_mask(call, *this, a);
    std::string layout = this->input_layout;  // aclnn takes char*
    const aclTensor* query = call.tensor(a.query.data, a.query.shape, type);
    const aclTensor* key = call.tensor(a.key.data, a.key.shape, type);
    const aclTensor* value = call.tensor(a.value.data, a.value.shape, type);
    const aclTensor* max_out = call.tensor(softmax_max, a.stats_shape, ACL_FLOAT);
    const aclTensor* sum_out = call.tensor(softmax_sum, a.stats_shape, ACL_FLOAT);
    const aclTensor* attention_out = call.tensor(out, a.out_shape, type);
    const auto scale = static_cast<double>(this->scale_value), keep = static_cast<double>(this->keep_prob);
    if (this->tnd()) {
      // The same arguments with the cumulative lengths (read on the host) after prefixOptional.
      return call.run<acl::FlashAttentionVarLenScorePrepare>(
          "aclnnFlashAttentionVarLenScore", query, key, value, nullptr, nullptr, nullptr, m.mask, nullptr,
          call.int_array(a.g.spans.query_end), call.int_array(a.g.spans.key_end), scale, keep, m.pre_tokens,
          m.next_tokens, *this->head_num, layout.data(), m.inner_precise, this->sparse_mode, max_out, sum_out,
          nullptr, attention_out);
    }
    return call.run<acl::FlashAttentionScorePrepare>(
        "aclnnFlashAttentionScore", query, key, value, nullptr, nullptr, nullptr, m.mask, nullptr, scale,
        keep, m.pre_tokens, m.next_tokens, *this->head_num, layout.data(), m.inner_precise, this->sparse_mode,
        max_out, sum_out, nullptr, attention_out);
  }
};

}  // namespace

void add_flash_attention_score_aclnn(OpList& ops) { add_float_types<FlashAttentionScoreAclnn>(ops, kAclnnEp); }

}  // namespace oao
