// aclnnFlashAttentionScore(Grad)'s limits beyond the contract (their pages, and for TND those of
// aclnnFlashAttentionVarLenScore and aclnnFlashAttentionUnpaddingScoreGrad, which take the lengths
// as host aclIntArrays), and what both kernels hand the vendor: the mask (modes 2 and 3 take the
// page's 2048 x 2048 causal mask, built here), the band and innerPrecise.
#pragma once

#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "aclnn/call.h"
#include "aclnn/limits.h"
#include "ort/flash_attention_score_signatures.h"

namespace oao {

// The page's head dims: D and Dv in 1 to 768.
inline Ort::Status check_fa_aclnn_limits(const char* op, acl::Family family, const FlashAttentionGeometry& g) {
  using acl::Family;
  if (!one_of(family, {Family::kA2, Family::kA3, Family::k950, Family::kUnknown}))
    return not_supported_on(op, family);
  constexpr int64_t kMaxHeadDim = 768;
  if (g.d > kMaxHeadDim || g.dv > kMaxHeadDim) {
    return op_error(op, std::string("aclnn") + op + " takes head dims D and Dv up to 768; got D = " +
                            std::to_string(g.d) + ", Dv = " + std::to_string(g.dv));
  }
  return Ort::Status(nullptr);
}

// TND's own (nothing for the other layouts): sparse_mode 3 computes no row without keys, so each batch needs
// S1_b <= S2_b (the VarLen page); the grad takes head dims up to 512 (the UnpaddingScoreGrad page).
inline Ort::Status check_fa_varlen_limits(const char* op, const FlashAttentionGeometry& g,
                                          int64_t sparse_mode, bool grad) {
  constexpr int64_t kMaxGradHeadDim = 512;
  if (!g.packed) return Ort::Status(nullptr);
  if (grad && (g.d > kMaxGradHeadDim || g.dv > kMaxGradHeadDim)) {
    return op_error(op,
                    "aclnnFlashAttentionUnpaddingScoreGrad (input_layout TND) takes head dims D and Dv up "
                    "to 512; got D = " +
                        std::to_string(g.d) + ", Dv = " + std::to_string(g.dv));
  }
  if (sparse_mode != 3) return Ort::Status(nullptr);
  for (int64_t b = 0; b < g.batches(); ++b) {
    if (g.query_rows(b) > g.key_rows(b)) {
      return op_error(
          op, "input_layout TND with sparse_mode 3: batch " + std::to_string(b) +
                  " of inputs "
                  "'actual_seq_lengths_query' and 'actual_seq_lengths_kv' has " +
                  std::to_string(g.query_rows(b)) + " query rows but " + std::to_string(g.key_rows(b)) +
                  " keys; the vendor needs S1 <= S2 in every batch (rows without keys are not computed)");
    }
  }
  return Ort::Status(nullptr);
}

// What the vendor takes for the mask, band and precision, from the node's attributes.
struct FaVendorMask {
  const aclTensor* mask = nullptr;
  int64_t pre_tokens = INT_MAX, next_tokens = INT_MAX;  // the page's "no band"
  // 2: high precision with the correction of rows whose keys are all masked (out 0, not NaN).
  int64_t inner_precise = 0;
};

// A TND batch with query rows and no keys has rows that see nothing, as a mask's full row.
inline bool fa_rows_without_keys(const FlashAttentionGeometry& g) {
  if (!g.packed) return false;
  for (int64_t b = 0; b < g.batches(); ++b)
    if (g.query_rows(b) > 0 && g.key_rows(b) == 0) return true;
  return false;
}

// The page's causal mask for modes 2 and 3 (1 above the diagonal), kSide x kSide, built once for
// every instantiation and thread (a function-local static of one inline function).
constexpr int64_t kFaCausalSide = 2048;
inline const std::vector<uint8_t>& fa_causal_mask() {
  static const std::vector<uint8_t> mask = [] {
    std::vector<uint8_t> m(kFaCausalSide * kFaCausalSide);
    for (int64_t i = 0; i < kFaCausalSide; ++i)
      for (int64_t j = i + 1; j < kFaCausalSide; ++j) m[i * kFaCausalSide + j] = 1;
    return m;
  }();
  return mask;
}

template <class Signature, class Args>
FaVendorMask fa_vendor_mask(AclnnCall& call, const Signature& op, const Args& a) {
  FaVendorMask v;
  if (op.sparse_mode != 0) {
    const std::vector<uint8_t>& causal = fa_causal_mask();
    v.mask = call.tensor(call.constant_to_device(causal), {kFaCausalSide, kFaCausalSide},
                         ACL_UINT8);
  } else if (a.mask) {
    const aclDataType type = a.mask->type == ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL ? ACL_BOOL : ACL_UINT8;
    v.mask = call.tensor(a.mask->data, a.mask->shape, type);
    v.pre_tokens = op.pre_tokens, v.next_tokens = op.next_tokens, v.inner_precise = 2;
  }
  if (fa_rows_without_keys(a.g)) v.inner_precise = 2;
  return v;
}

// `bytes` of `value`'s pattern (one element of `size` bytes) written into device memory on the
// stream: what a call with no key rows leaves, which the vendor would not accept.
inline void fa_fill(AclnnCall& call, void* dst, int64_t count, const void* value, size_t size) {
  if (count == 0) return;
  std::vector<unsigned char> host(static_cast<size_t>(count) * size);
  for (int64_t i = 0; i < count; ++i) std::memcpy(&host[i * size], value, size);
  call.copy_on_stream(dst, call.to_device(host.data(), host.size()), host.size());
}

}  // namespace oao
