// libopapi_transformer.so, part 2: aclnnLightningIndexer (the current signature) and its grad.
// Per query token t the score of key s is I = sum_j w[t,j] relu(q[t,j] . k[s]); the sparseCount
// best allowed keys go out in descending score, ties to the lower key, NaN last, and the slots past
// them -1 / 0. The grad, per query token t and counted slot with key row kv: s_j = q[t,j] . kv,
// dW[t,j] += relu(s_j) dy[t,slot], and where s_j > 0, g_j = w[t,j] dy[t,slot] flows to dQ[t,j]
// (g_j kv) and to dK[kv] (g_j q[t,j]).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>

#include "lightning_indexer_layouts.h"
#include "op.h"
#include "tensor.h"

namespace {

using namespace aclemu;

constexpr int64_t kHeadDim = 128;  // the one head dim both pages take

struct Sizes {
  int64_t n1, d;
  int64_t k;  // sparseCount, or the grad's topK (dy's last axis)
  std::vector<Batch> batches;
  int64_t sparse_mode;
};

bool valid_sparse_count(int64_t count) {
  return (count >= 1 && count <= 2048) || (count > 0 && count <= 8192 && count % 1024 == 0);
}

bool valid_heads(int64_t n1, Product p) {
  if (p == Product::k950) return n1 == 8 || n1 == 16 || n1 == 24 || n1 == 32 || n1 == 64;
  return n1 >= 1 && n1 <= 64;
}

void compute(const Sizes& z, const aclTensor* q_p, const aclTensor* k_p, const aclTensor* w_p,
             const aclTensor* idx_p, const aclTensor* val_p) {
  const std::vector<float> q = read_floats(*q_p), key = read_floats(*k_p), w = read_floats(*w_p);
  const int64_t tokens = numel(*idx_p) / z.k;
  std::vector<int64_t> idx(static_cast<size_t>(tokens * z.k), -1);
  std::vector<float> values(idx.size(), 0.0f);
  std::vector<float> scores;
  std::vector<int64_t> order;
  for (const Batch& batch : z.batches) {
    for (int64_t s = 0; s < batch.q_len; ++s) {
      const int64_t t = batch.q_begin + s;
      const int64_t allowed = allowed_keys(batch, s, z.sparse_mode);
      scores.assign(static_cast<size_t>(allowed), 0.0f);
      for (int64_t i = 0; i < allowed; ++i) {
        const float* kv = &key[(batch.k_begin + i) * z.d];
        float score = 0.0f;
        for (int64_t j = 0; j < z.n1; ++j) {
          const float* qj = &q[(t * z.n1 + j) * z.d];
          float dot = 0.0f;
          for (int64_t e = 0; e < z.d; ++e) dot += qj[e] * kv[e];
          score += w[t * z.n1 + j] * std::max(dot, 0.0f);  // keeps a NaN dot
        }
        scores[i] = score;
      }
      const int64_t kept = std::min(z.k, allowed);
      order.resize(static_cast<size_t>(allowed));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + kept, order.end(), [&](int64_t a, int64_t b) {
        const bool nan_a = std::isnan(scores[a]), nan_b = std::isnan(scores[b]);
        if (nan_a != nan_b) return nan_b;
        if (!nan_a && scores[a] != scores[b]) return scores[a] > scores[b];
        return a < b;
      });
      for (int64_t slot = 0; slot < kept; ++slot) {
        idx[t * z.k + slot] = order[slot];
        values[t * z.k + slot] = scores[order[slot]];
      }
    }
  }
  write_ints(*idx_p, idx);
  if (val_p != nullptr) write_floats(*val_p, values);
}

Plan lightning_indexer(const aclTensor* q_p, const aclTensor* k_p, const aclTensor* w_p,
                       const aclTensor* lq_p, const aclTensor* lk_p, const aclTensor* block_table,
                       const char* layout_query, const char* layout_key, int64_t sparse_count,
                       int64_t sparse_mode, int64_t pre_tokens, int64_t next_tokens, bool return_values,
                       const aclTensor* idx_p, const aclTensor* val_p) {
  const aclTensor& q = need(q_p, "query");
  const aclTensor& key = need(k_p, "key");
  const aclTensor& w = need(w_p, "weights");
  const aclTensor& idx = need(idx_p, "sparseIndicesOut");
  std::vector<const aclTensor*> inputs{q_p, k_p, w_p}, outputs{idx_p};
  if (return_values) outputs.push_back(&need(val_p, "sparseValuesOut"));
  if (layout_key != nullptr && std::strcmp(layout_key, "PA_BSND") == 0) {
    fail(kErrParamInvalid, "layoutKey PA_BSND (paged key cache) is not emulated");
  }
  if (block_table != nullptr) fail(kErrParamInvalid, "blockTableOptional is not emulated (PA_BSND only)");
  const Layout layout = parse_layout(layout_query, "layoutQuery");
  if (parse_layout(layout_key, "layoutKey") != layout)
    fail(kErrParamInvalid, "layoutKey must equal layoutQuery");
  const bool bsnd = layout == Layout::kBSND;
  if (bsnd) {
    // On BSND they would be per-batch valid lengths, which the emulator does not model.
    if (lq_p != nullptr || lk_p != nullptr)
      fail(kErrParamInvalid, "actual sequence lengths with BSND are not emulated");
  } else {
    check_dtype(need(lq_p, "actualSeqLengthsQueryOptional"), "actualSeqLengthsQueryOptional", {ACL_INT32});
    check_dtype(need(lk_p, "actualSeqLengthsKeyOptional"), "actualSeqLengthsKeyOptional", {ACL_INT32});
    inputs.insert(inputs.end(), {lq_p, lk_p});
  }
  const Product p = product();
  check_dtype(q, "query", {ACL_FLOAT16, ACL_BF16});
  check_same_dtype(key, "key", q, "query");
  if (w.dtype != q.dtype && (w.dtype != ACL_FLOAT || p == Product::k950)) {
    fail(kErrParamInvalid, "weights dtype " + dtype_name(w.dtype) + " must equal query dtype " +
                               dtype_name(q.dtype) + (p == Product::k950 ? "" : " or be FLOAT32"));
  }
  check_dtype(idx, "sparseIndicesOut", {ACL_INT32});
  if (return_values) check_same_dtype(*val_p, "sparseValuesOut", q, "query");
  if (!valid_sparse_count(sparse_count)) {
    fail(kErrParamInvalid,
         "sparseCount " + std::to_string(sparse_count) + " not in 1..2048 or a multiple of 1024 up to 8192");
  }
  if (sparse_mode != 0 && sparse_mode != 3) {
    fail(kErrParamInvalid, "sparseMode " + std::to_string(sparse_mode) + " not 0 or 3");
  }
  for (const aclTensor* t : inputs) check_contiguous(*t, "every input");
  for (const aclTensor* t : outputs) check_contiguous(*t, "every output");
  constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  if (pre_tokens != kUnbounded || next_tokens != kUnbounded) {
    fail(kErrTiling, "preTokens and nextTokens must be 2^63-1");
  }
  if (p != Product::kA2 && p != Product::kA3 && p != Product::k950) fail_product();

  const auto [lead, n1, d] = check_query_key_weights(q, key, w, layout);
  if (numel(q) == 0 || numel(key) == 0) fail(kErrTiling, "empty query or key is not supported");
  Sizes z{n1, d, sparse_count, {}, sparse_mode};
  std::vector<int64_t> want_out = lead;
  want_out.insert(want_out.end(), {1, sparse_count});
  check_shape(idx, "sparseIndicesOut", want_out, "[B, S1, N2, sparseCount] or [T1, N2, sparseCount]");
  if (return_values) check_shape(*val_p, "sparseValuesOut", want_out, "sparseIndicesOut's shape");
  if (z.d != kHeadDim) fail(kErrTiling, "head dim D must be 128");
  if (!valid_heads(z.n1, p)) {
    fail(kErrTiling,
         std::string("query N1 must be ") + (p == Product::k950 ? "8, 16, 24, 32 or 64" : "in 1..64"));
  }
  z.batches = bsnd ? equal_batches(lead[0], lead[1], key.dims[1])
                   : cumulative_batches(*lq_p, *lk_p, lead[0], key.dims[0]);
  const aclTensor* values_out = return_values ? val_p : nullptr;
  return Plan{inputs, outputs, [=] { compute(z, q_p, k_p, w_p, idx_p, values_out); }};
}

// The grad's limits of the current page and tiling (the seed page's older N1 = 64 and topK = 2048
// were relaxed to ranges): at most 64 query heads, topK up to 2048 and no larger than S2.
constexpr int64_t kMaxHeads = 64, kMaxTopK = 2048, kMaxBatch = 1024, kMaxSeq = 131072;

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

void compute_grad(const Sizes& z, const aclTensor* q_p, const aclTensor* k_p, const aclTensor* dy_p,
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
  return Plan{
      inputs, {dq_p, dk_p, dw_p}, [=] { compute_grad(z, q_p, k_p, dy_p, idx_p, w_p, dq_p, dk_p, dw_p); }};
}

}  // namespace

ACLEMU_API aclnnStatus aclnnLightningIndexerGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* weights,
    const aclTensor* actualSeqLengthsQueryOptional, const aclTensor* actualSeqLengthsKeyOptional,
    const aclTensor* blockTableOptional, char* layoutQueryOptional, char* layoutKeyOptional,
    int64_t sparseCount, int64_t sparseMode, int64_t preTokens, int64_t nextTokens, bool returnValues,
    const aclTensor* sparseIndicesOut, const aclTensor* sparseValuesOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepare(
      "aclnnLightningIndexerGetWorkspaceSize", "aclnnLightningIndexer", workspaceSize, executor, [&] {
        return lightning_indexer(query, key, weights, actualSeqLengthsQueryOptional,
                                 actualSeqLengthsKeyOptional, blockTableOptional, layoutQueryOptional,
                                 layoutKeyOptional, sparseCount, sparseMode, preTokens, nextTokens,
                                 returnValues, sparseIndicesOut, sparseValuesOut);
      });
}

ACLEMU_API aclnnStatus aclnnLightningIndexer(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                             aclrtStream stream) {
  return launch("aclnnLightningIndexer", workspace, workspaceSize, executor, stream);
}

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

static_assert(
    std::is_same_v<decltype(&aclnnLightningIndexerGetWorkspaceSize), oao::acl::LightningIndexerPrepare>);
static_assert(std::is_same_v<decltype(&aclnnLightningIndexer), oao::acl::Launch>);
static_assert(std::is_same_v<decltype(&aclnnLightningIndexerGradGetWorkspaceSize),
                             oao::acl::LightningIndexerGradPrepare>);
static_assert(std::is_same_v<decltype(&aclnnLightningIndexerGrad), oao::acl::Launch>);
