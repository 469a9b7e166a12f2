#include "kernels/flash_attention_score.h"

#include "ort/flash_attention_score_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct FlashAttentionScoreKernel : FlashAttentionScoreSignature<T> {
  using FlashAttentionScoreSignature<T>::FlashAttentionScoreSignature;

  using typename FlashAttentionScoreSignature<T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    if (auto status = check_fa_blas_sizes(this->kName, a.g); !status.IsOK()) return status;
    const auto* mask = a.mask ? static_cast<const uint8_t*>(a.mask->data) : nullptr;  // bool is one byte
    flash_attention_score(a.query.data, a.key.data, a.value.data, mask, a.g,
                          io.output<T>(schema::FlashAttentionScore::kOutput_attention_out, a.out_shape),
                          io.output<float>(schema::FlashAttentionScore::kOutput_softmax_max, a.stats_shape),
                          io.output<float>(schema::FlashAttentionScore::kOutput_softmax_sum, a.stats_shape),
                          io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_flash_attention_score_cpu(OpList& ops) { add_float_types<FlashAttentionScoreKernel>(ops, kCpu); }

}  // namespace oao
