// libopapi_transformer.so, part 3: aclnnLightningIndexerGrad. Per query token t and counted slot
// with key row kv: s_j = q[t,j] . kv, dW[t,j] += relu(s_j) dy[t,slot], and where s_j > 0,
// g_j = w[t,j] dy[t,slot] flows to dQ[t,j] (g_j kv) and to dK[kv] (g_j q[t,j]).
#include <algorithm>
#include <string>
#include <type_traits>

#include "lightning_indexer_layouts.h"
#include "op.h"
#include "tensor.h"

namespace {

using namespace aclemu;

// The limits of the current page and tiling (the seed page's older N1 = 64 and topK = 2048 were
// relaxed to ranges): D fixed, at most 64 query heads, topK up to 2048 and no larger than S2.
constexpr int64_t kMaxHeads = 64, kHeadDim = 128, kMaxTopK = 2048, kMaxBatch = 1024, kMaxSeq = 131072;

struct Sizes {
  int64_t n1, d, k;
  std::vector<Batch> batches;
  int64_t sparse_mode;
};

// Slots of token s that the kernel reads: all topK, or in sparse mode 3 only as many as it may see.
int64_t counted_slots(const Sizes& z, const Batch& batch, int64_t s) {
  return z.sparse_mode == 0 ? z.k : std::min(z.k, allowed_keys(batch, s, z.sparse_mode));
}

// Indices are local to their batch; -1 is padding. The device does not check them: the emulator
// does, before writing anything, so a bad index is an error rather than a stray read.
void check_indices(const Sizes& z, const std::vector<int64_t>& idx) {
  for (size_t b = 0; b < z.batches.size(); ++b) {
    const Batch& batch = z.batches[b];
    for (int64_t s = 0; s < batch.q_len; ++s) {
      const int64_t t = batch.q_begin + s;
      for (int64_t slot = 0; slot < counted_slots(z, batch, s); ++slot) {
        const int64_t v = idx[t * z.k + slot];
        if (v != -1 && (v < 0 || v >= batch.k_len)) {
          fail(kErrRuntime, "out-of-bounds sparse index " + std::to_string(v) + " at token " +
                                std::to_string(t) + " slot " + std::to_string(slot) + " (batch " +
                                std::to_string(b) + " has " + std::to_string(batch.k_len) + " keys)");
        }
      }
    }
  }
}

void compute(const Sizes& z, const aclTensor* q_p, const aclTensor* k_p, const aclTensor* dy_p,
             const aclTensor* idx_p, const aclTensor* w_p, const aclTensor* dq_p, const aclTensor* dk_p,
             const aclTensor* dw_p) {
  const std::vector<int64_t> idx = read_ints(*idx_p);
  check_indices(z, idx);
  const std::vector<float> q = read_floats(*q_p), key = read_floats(*k_p), dy = read_floats(*dy_p),
                           w = read_floats(*w_p);
  std::vector<float> dq(q.size(), 0.0f), dk(key.size(), 0.0f), dw(w.size(), 0.0f);
  for (const Batch& batch : z.batches) {
    for (int64_t s = 0; s < batch.q_len; ++s) {
      const int64_t t = batch.q_begin + s;
      for (int64_t slot = 0; slot < counted_slots(z, batch, s); ++slot) {
        const int64_t v = idx[t * z.k + slot];
        if (v == -1) continue;
        const int64_t row = batch.k_begin + v;
        const float* kv = &key[row * z.d];
        const float grad = dy[t * z.k + slot];
        for (int64_t j = 0; j < z.n1; ++j) {
          const float* qj = &q[(t * z.n1 + j) * z.d];
          float score = 0.0f;
          for (int64_t e = 0; e < z.d; ++e) score += qj[e] * kv[e];
          dw[t * z.n1 + j] += std::max(score, 0.0f) * grad;
          if (!(score > 0.0f)) continue;
          const float g = w[t * z.n1 + j] * grad;
          for (int64_t e = 0; e < z.d; ++e) {
            dq[(t * z.n1 + j) * z.d + e] += g * kv[e];
            dk[row * z.d + e] += g * qj[e];
          }
        }
      }
    }
  }
  write_floats(*dq_p, dq);
  write_floats(*dk_p, dk);
  write_floats(*dw_p, dw);
}

Plan lightning_indexer_grad(const aclTensor* q_p, const aclTensor* k_p, const aclTensor* dy_p,
                            const aclTensor* idx_p, const aclTensor* w_p, const aclTensor* lq_p,
                            const aclTensor* lk_p, int64_t head_num, const char* layout_text,
                            int64_t sparse_mode, const aclTensor* dq_p, const aclTensor* dk_p,
                            const aclTensor* dw_p) {
  const aclTensor& q = need(q_p, "query");
  const aclTensor& key = need(k_p, "key");
  const aclTensor& dy = need(dy_p, "dy");
  const aclTensor& idx = need(idx_p, "sparseIndices");
  const aclTensor& w = need(w_p, "weights");
  const aclTensor& dq = need(dq_p, "dQuery");
  const aclTensor& dk = need(dk_p, "dKey");
  const aclTensor& dw = need(dw_p, "dWeights");
  const Layout layout = parse_layout(layout_text, "layout");
  const bool bsnd = layout == Layout::kBSND;
  std::vector<const aclTensor*> inputs{q_p, k_p, dy_p, idx_p, w_p};
  if (bsnd) {
    if (lq_p != nullptr || lk_p != nullptr) {
      fail(kErrParamInvalid, "actualSeqLengthsQuery and actualSeqLengthsKey must be NULL for layout BSND");
    }
  } else {
    check_dtype(need(lq_p, "actualSeqLengthsQuery"), "actualSeqLengthsQuery", {ACL_INT32});
    check_dtype(need(lk_p, "actualSeqLengthsKey"), "actualSeqLengthsKey", {ACL_INT32});
    inputs.insert(inputs.end(), {lq_p, lk_p});
  }
  check_dtype(q, "query", {ACL_FLOAT16, ACL_BF16});
  check_same_dtype(key, "key", q, "query");
  check_same_dtype(dy, "dy", q, "query");
  check_same_dtype(w, "weights", q, "query");
  check_same_dtype(dq, "dQuery", q, "query");
  check_same_dtype(dk, "dKey", q, "query");
  check_same_dtype(dw, "dWeights", q, "query");
  check_dtype(idx, "sparseIndices", {ACL_INT32});
  const Product p = product();
  if (p != Product::kA2 && p != Product::kA3 && p != Product::k950) fail_product();
  if (sparse_mode != 0 && sparse_mode != 3)
    fail(kErrTiling, "sparseMode " + std::to_string(sparse_mode) + " not 0 or 3");

  const auto [lead, n1, d] = check_query_key_weights(q, key, w, layout);
  Sizes z{n1, d, 0, {}, sparse_mode};
  check_rank(dy, "dy", lead.size() + 1, lead.size() + 1);
  z.k = dy.dims.back();
  std::vector<int64_t> want_dy = lead;
  want_dy.push_back(z.k);
  check_shape(dy, "dy", want_dy, "query's tokens and topK");
  check_shape(idx, "sparseIndices", dy.dims, "dy's shape");
  check_shape(dq, "dQuery", q.dims, "query's shape");
  check_shape(dk, "dKey", key.dims, "key's shape");
  check_shape(dw, "dWeights", w.dims, "weights' shape");
  if (head_num != z.n1) fail(kErrTiling, "headNum " + std::to_string(head_num) + " differs from query's N1");
  if (z.n1 < 1 || z.n1 > kMaxHeads) fail(kErrTiling, "query N1 must be in 1..64");
  if (z.d != kHeadDim) fail(kErrTiling, "head dim D must be 128");
  if (z.k < 1 || z.k > kMaxTopK) fail(kErrTiling, "topK (dy's last axis) must be in 1..2048");
  z.batches = bsnd ? equal_batches(lead[0], lead[1], key.dims[1])
                   : cumulative_batches(*lq_p, *lk_p, lead[0], key.dims[0]);
  if (z.batches.empty() || static_cast<int64_t>(z.batches.size()) > kMaxBatch)
    fail(kErrTiling, "B must be in 1..1024");
  for (const Batch& batch : z.batches) {
    if (batch.q_len < 1 || batch.q_len > kMaxSeq) fail(kErrTiling, "every batch's S1 must be in 1..131072");
    if (batch.k_len < z.k || batch.k_len > kMaxSeq)
      fail(kErrTiling, "every batch's S2 must be in topK..131072");
  }
  return Plan{inputs, {dq_p, dk_p, dw_p}, [=] { compute(z, q_p, k_p, dy_p, idx_p, w_p, dq_p, dk_p, dw_p); }};
}

}  // namespace

ACLEMU_API aclnnStatus aclnnLightningIndexerGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* dy, const aclTensor* sparseIndices,
    const aclTensor* weights, const aclTensor* actualSeqLengthsQuery, const aclTensor* actualSeqLengthsKey,
    int64_t headNum, char* layout, int64_t sparseMode, int64_t, int64_t, bool, const aclTensor* dQuery,
    const aclTensor* dKey, const aclTensor* dWeights, uint64_t* workspaceSize, aclOpExecutor** executor) {
  // preTokens, nextTokens and deterministic are read and ignored, as by the kernel.
  return prepare("aclnnLightningIndexerGradGetWorkspaceSize", "aclnnLightningIndexerGrad", workspaceSize,
                 executor, [&] {
                   return lightning_indexer_grad(query, key, dy, sparseIndices, weights,
                                                 actualSeqLengthsQuery, actualSeqLengthsKey, headNum, layout,
                                                 sparseMode, dQuery, dKey, dWeights);
                 });
}

ACLEMU_API aclnnStatus aclnnLightningIndexerGrad(void* workspace, uint64_t workspaceSize,
                                                 aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnLightningIndexerGrad", workspace, workspaceSize, executor, stream);
}

static_assert(std::is_same_v<decltype(&aclnnLightningIndexerGradGetWorkspaceSize),
                             oao::acl::LightningIndexerGradPrepare>);
static_assert(std::is_same_v<decltype(&aclnnLightningIndexerGrad), oao::acl::Launch>);
