#include <limits>

#include "aclnn/flash_attention_score_limits.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct FlashAttentionScoreAclnn : AclnnKernel<FlashAttentionScoreSignature<T>> {
  using AclnnKernel<FlashAttentionScoreSignature<T>>::AclnnKernel;
  using typename AclnnKernel<FlashAttentionScoreSignature<T>>::Args;

  Ort::Status read(const Io& io, Args& a) const {
    if (auto status = check_fa_not_tnd(this->kName, this->tnd()); !status.IsOK()) return status;
    return FlashAttentionScoreSignature<T>::read(io, a);
  }

  Ort::Status run(const Io& io, const Args& a) const {
    AclnnCall call(this->kName, io, this->allocator.get());
    if (auto status = check_fa_aclnn_limits(this->kName, call.cann().family(), a.g); !status.IsOK())
      return status;
    auto* out = io.output<T>(0, a.out_shape);
    auto* softmax_max = io.output<float>(1, a.stats_shape);
    auto* softmax_sum = io.output<float>(2, a.stats_shape);
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
    constexpr aclDataType type = acl_type<T>();
    const FaVendorMask m = fa_vendor_mask(call, *this, a);
    std::string layout = this->input_layout;  // aclnn takes char*
    return call.run<acl::FlashAttentionScorePrepare>(
        "aclnnFlashAttentionScore", call.tensor(a.query.data, a.query.shape, type),
        call.tensor(a.key.data, a.key.shape, type), call.tensor(a.value.data, a.value.shape, type), nullptr,
        nullptr, nullptr, m.mask, nullptr, static_cast<double>(this->scale_value),
        static_cast<double>(this->keep_prob), m.pre_tokens, m.next_tokens, *this->head_num, layout.data(),
        m.inner_precise, this->sparse_mode, call.tensor(softmax_max, a.stats_shape, ACL_FLOAT),
        call.tensor(softmax_sum, a.stats_shape, ACL_FLOAT), nullptr, call.tensor(out, a.out_shape, type));
  }
};

}  // namespace

void add_flash_attention_score_aclnn(OpList& ops) { add_float_types<FlashAttentionScoreAclnn>(ops, kAclnnEp); }

}  // namespace oao
