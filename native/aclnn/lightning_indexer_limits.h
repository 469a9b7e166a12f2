// aclnnLightningIndexer(Grad)'s limits beyond the contract (their pages and the vendor's operator
// definitions): float16 or bfloat16, int32 indices and sequence lengths, head dim 128, at most 64
// query heads, and the per-product support.
#pragma once

#include <optional>

#include "aclnn/call.h"
#include "aclnn/limits.h"
#include "ort/lightning_indexer_signatures.h"

namespace oao {

inline Ort::Status check_lightning_indexer_family(const char* op, acl::Family family) {
  using acl::Family;
  return one_of(family, {Family::kA2, Family::kA3, Family::k950, Family::kUnknown})
             ? Ort::Status(nullptr)
             : not_supported_on(op, family);
}

inline Ort::Status check_int32(const char* op, const char* name, ONNXTensorElementDataType type) {
  if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) return Ort::Status(nullptr);
  return op_error(op, std::string("input '") + name + "' must be int32 for aclnn" + op +
                          " (its operator definition takes int32 only)");
}

// TND's sequence lengths read back to the host for the contract's checks, the host waiting for the
// stream; BSND takes none, so nothing is read.
class HostLengthPair {
 public:
  Ort::Status read(const char* op, AclnnCall& call, const HostLengths& query, const HostLengths& key,
                   bool tnd) {
    const char* names[] = {"actual_seq_lengths_query", "actual_seq_lengths_key"};
    lengths_[0] = query;
    lengths_[1] = key;
    for (size_t i = 0; i < 2; ++i) {
      if (!lengths_[i] || !tnd) continue;
      if (auto status = check_int32(op, names[i], lengths_[i]->type); !status.IsOK()) return status;
      storage_[i] = call.to_host<int32_t>(lengths_[i]->data, element_count(lengths_[i]->shape));
      lengths_[i]->data = storage_[i].data();
    }
    return Ort::Status(nullptr);
  }
  const HostLengths& query() const { return lengths_[0]; }
  const HostLengths& key() const { return lengths_[1]; }

 private:
  HostLengths lengths_[2];
  std::vector<int32_t> storage_[2];
};

// TND's sequence lengths as aclnn takes them (int32, checked by HostLengthPair); none for BSND.
inline const aclTensor* lengths_tensor(AclnnCall& call, const HostLengths& lengths, bool tnd) {
  return tnd && lengths ? call.tensor(lengths->data, lengths->shape, ACL_INT32) : nullptr;
}

inline Ort::Status check_head_dim(const char* op, const LightningIndexerShape& s) {
  if (s.d == 128) return Ort::Status(nullptr);
  return op_error(
      op, std::string("aclnn") + op + " needs head dim D = 128; query has D = " + std::to_string(s.d));
}

// What the aclnn kernels of LightningIndexer and its grad share: float16 and bfloat16 only (a
// float32 kernel reports that), and the call opened while the inputs are read, to copy TND's
// lengths to the host for the contract's checks.
template <class OpSignature>
struct LightningIndexerAclnnKernel : AclnnKernel<OpSignature> {
  static constexpr bool kTypesAllowed = OpSignature::kT != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  static Ort::Status type_error() {
    return op_error(OpSignature::kName, std::string("aclnn") + OpSignature::kName +
                                            " takes float16 or bfloat16 inputs, not float32");
  }

  using AclnnKernel<OpSignature>::AclnnKernel;

  struct Args : OpSignature::Args {
    std::optional<AclnnCall> call;
    HostLengthPair host_lengths;
  };

  // The call opened, the lengths on the host and the inputs checked against the contract.
  Ort::Status check_on_host(const Io& io, Args& a) const {
    AclnnCall& call = a.call.emplace(OpSignature::kName, io, this->allocator.get());
    if (auto status =
            a.host_lengths.read(OpSignature::kName, call, a.query_lengths, a.key_lengths, this->tnd());
        !status.IsOK())
      return status;
    return this->check(a, a.host_lengths.query(), a.host_lengths.key());
  }

  // The first limits both vendor kernels share: the product and the head dim.
  static Ort::Status check_product_and_head_dim(const Args& a) {
    return first_error(
        [&] { return check_lightning_indexer_family(OpSignature::kName, a.call->cann().family()); },
        [&] { return check_head_dim(OpSignature::kName, a.s); });
  }
};

// Batches and their lengths: B in [1, 1024], S1 in [1, 128K], S2 in [min_key_rows, 128K].
inline Ort::Status check_batches(const char* op, const LightningIndexerShape& s, int64_t min_key_rows) {
  constexpr int64_t kMaxSeq = 128 * 1024;
  const auto batches = static_cast<int64_t>(s.spans.query_end.size());
  if (batches < 1 || batches > 1024) {
    return op_error(op,
                    std::string("aclnn") + op + " takes 1 to 1024 batches; got " + std::to_string(batches));
  }
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t s1 = s.spans.query_end[b] - s.spans.query_begin(b);
    const int64_t s2 = s.spans.key_end[b] - s.spans.key_begin(b);
    if (s1 < 1 || s1 > kMaxSeq || s2 < min_key_rows || s2 > kMaxSeq) {
      return op_error(op, std::string("aclnn") + op + " needs 1 <= S1 <= 131072 and " +
                              std::to_string(min_key_rows) + " <= S2 <= 131072 per batch; batch " +
                              std::to_string(b) + " has S1 = " + std::to_string(s1) +
                              ", S2 = " + std::to_string(s2));
    }
  }
  return Ort::Status(nullptr);
}

// The vendor kernel reads every counted slot as a key row, -1 included (NOTES.md); the contract
// skips a -1 there, so aclnn gets none: refused here rather than read out of bounds on the device.
inline Ort::Status check_no_skipped_slots(const char* op, const int32_t* indices,
                                          const LightningIndexerShape& s, int sparse_mode) {
  const std::vector<int64_t> batch_of = s.spans.batch_of_tokens();
  for (int64_t t = 0; t < s.spans.tokens(); ++t) {
    const int64_t b = batch_of[t];
    const int64_t counted = counted_slots(s.spans, b, t - s.spans.query_begin(b), s.k, sparse_mode);
    for (int64_t slot = 0; slot < counted; ++slot) {
      if (indices[t * s.k + slot] == -1) {
        return op_error(op, "sparse_indices of token " + std::to_string(t) + ", slot " +
                                std::to_string(slot) +
                                " is -1; aclnnLightningIndexerGrad reads every slot sparse_mode counts "
                                "and cannot skip it (the CPU kernel can)");
      }
    }
  }
  return Ort::Status(nullptr);
}

}  // namespace oao
