// aclnnFlashAttentionScore(Grad)'s limits beyond the contract (their pages), and what both kernels
// hand the vendor: the mask (modes 2 and 3 take the page's 2048 x 2048 causal mask, built here),
// the band and innerPrecise. TND goes through aclnnFlashAttentionVarLenScore(Grad), whose
// aclIntArray lengths this library does not bind yet.
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

// Refused before the lengths are read: they would be aclIntArrays on the host.
inline Ort::Status check_fa_not_tnd(const char* op, bool tnd) {
  if (!tnd) return Ort::Status(nullptr);
  return Ort::Status((std::string(op) + ": input_layout TND needs aclnnFlashAttentionVarLenScore, which the "
                                        "aclnn backend does not bind yet; use BSND, BNSD, BSH or SBH")
                         .c_str(),
                     ORT_NOT_IMPLEMENTED);
}

// What the vendor takes for the mask, band and precision, from the node's attributes.
struct FaVendorMask {
  const aclTensor* mask = nullptr;
  int64_t pre_tokens = INT_MAX, next_tokens = INT_MAX;  // the page's "no band"
  // 2: high precision with the correction of rows whose keys are all masked (out 0, not NaN).
  int64_t inner_precise = 0;
};

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
    v.mask = call.tensor(call.to_device(causal.data(), causal.size()), {kFaCausalSide, kFaCausalSide},
                         ACL_UINT8);
  } else if (a.mask) {
    const aclDataType type = a.mask->type == ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL ? ACL_BOOL : ACL_UINT8;
    v.mask = call.tensor(a.mask->data, a.mask->shape, type);
    v.pre_tokens = op.pre_tokens, v.next_tokens = op.next_tokens, v.inner_precise = 2;
  }
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
