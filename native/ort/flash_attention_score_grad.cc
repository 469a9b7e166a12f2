#include "kernels/flash_attention_score_grad.h"

#include "ort/flash_attention_score_signatures.h"
#include "ort/ops.h"

namespace oao {
namespace {

template <class T>
struct FlashAttentionScoreGradKernel : FlashAttentionScoreGradSignature<T> {
  using FlashAttentionScoreGradSignature<T>::FlashAttentionScoreGradSignature;

  using typename FlashAttentionScoreGradSignature<T>::Args;
  Ort::Status run(const Io& io, const Args& a) const {
    if (auto status = check_fa_blas_sizes(this->kName, a.g); !status.IsOK()) return status;
    const auto* mask = a.mask ? static_cast<const uint8_t*>(a.mask->data) : nullptr;  // bool is one byte
    flash_attention_score_grad(
        a.query.data, a.key.data, a.value.data, a.dy.data, mask, a.softmax_max.data, a.softmax_sum.data,
        a.attention_in.data, a.g, io.output<T>(schema::FlashAttentionScoreGrad::kOutput_dq, a.query.shape),
        io.output<T>(schema::FlashAttentionScoreGrad::kOutput_dk, a.key.shape),
        io.output<T>(schema::FlashAttentionScoreGrad::kOutput_dv, a.value.shape), io.parallel());
    return Ort::Status(nullptr);
  }
};

}  // namespace

void add_flash_attention_score_grad_cpu(OpList& ops) {
  add_float_types<FlashAttentionScoreGradKernel>(ops, kCpu);
}

}  // namespace oao
