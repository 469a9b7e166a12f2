// libopapi_transformer.so, part 3: aclnnFlashAttentionScore and aclnnFlashAttentionScoreGrad on
// BSND, BNSD, BSH and SBH, and aclnnFlashAttentionVarLenScore and
// aclnnFlashAttentionUnpaddingScoreGrad on TND (the cumulative lengths as host aclIntArrays), in
// float32 from the pages' formulas: softmax(scale q.k) over the keys the mask and sparse mode allow,
// per batch, GQA by N1 / N2, the statistics [B, N1, S1, 8] (TND [T1, N1, 8]). Modes 2 and 3 take
// the page's 2048 x 2048 causal mask, which the launch checks value by value; a row with no key
// gives out 0, max -inf, sum 0 and gradients 0. bfloat16's P and dS enter their products rounded.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "elements.h"
#include "op.h"
#include "tensor.h"

namespace {

using namespace aclemu;

constexpr int64_t kMaxHeadDim = 768;
constexpr int64_t kCausalMaskSide = 2048;
constexpr size_t kMaxVarLenBatches = 20000;  // the VarLen first phase's own check (its page says 2K)

// Element offsets in a tensor of the layout: batch b, row s (within the batch), head n, head dim e.
struct Layout {
  std::string name;
  int64_t b = 0, s = 0, n = 0, e = 0;  // extents (TND: s is T, b the lengths' count)
  std::vector<int64_t> ends;           // TND: each batch's cumulative end row
  int64_t begin(int64_t bi) const { return bi == 0 ? 0 : ends[bi - 1]; }
  int64_t rows(int64_t bi) const { return name == "TND" ? ends[bi] - begin(bi) : s; }
  int64_t at(int64_t bi, int64_t si, int64_t ni, int64_t ei) const {
    if (name == "TND") return ((begin(bi) + si) * n + ni) * e + ei;
    if (name == "BNSD") return ((bi * n + ni) * s + si) * e + ei;
    if (name == "SBH") return ((si * b + bi) * n + ni) * e + ei;
    return ((bi * s + si) * n + ni) * e + ei;  // BSND, BSH
  }
};

// B, S and the heads axis (BSH / SBH: H, split once D is known).
Layout read_layout(const aclTensor& t, const std::string& name, const char* what) {
  const bool merged = name == "BSH" || name == "SBH";
  if (t.dims.size() != (merged || name == "TND" ? 3u : 4u))
    fail(kErrParamInvalid, std::string(what) + " rank " + std::to_string(t.dims.size()) + " does not fit " + name);
  const auto& d = t.dims;
  if (name == "BSND") return {name, d[0], d[1], d[2], d[3], {}};
  if (name == "BNSD") return {name, d[0], d[2], d[1], d[3], {}};
  if (name == "BSH") return {name, d[0], d[1], d[2], 1, {}};
  if (name == "TND") return {name, 0, d[0], d[1], d[2], {}};  // batches from the lengths
  return {name, d[1], d[0], d[2], 1, {}};                     // SBH
}

// TND's lengths as the VarLen first phase takes them. The vendor clamps a decrease to an empty
// batch and needs only their sum within T; the emulator, whose callers never pass those, refuses
// both so that a wrong array cannot go unnoticed.
void read_lengths(const aclIntArray* array, const char* what, Layout& l) {
  if (array == nullptr) fail(kErrParamNullptr, std::string(what) + " is NULL (TND needs both lengths)");
  if (!hooks().is_live(Kind::kIntArray, array))
    fail(kErrParamInvalid, std::string(what) + " is not a live aclIntArray");
  const std::vector<int64_t>& v = array->values;
  if (v.empty() || v.size() > kMaxVarLenBatches)
    fail(kErrParamInvalid,
         std::string(what) + " must hold 1 to 20000 values, got " + std::to_string(v.size()));
  for (size_t b = 0; b < v.size(); ++b) {
    if (v[b] < (b == 0 ? 0 : v[b - 1]))
      fail(kErrTiling, std::string(what) + " must be cumulative ends, non-decreasing from 0; got " +
                           std::to_string(v[b]) + " at batch " + std::to_string(b));
  }
  if (v.back() != l.s)
    fail(kErrTiling,
         std::string(what) + " ends at " + std::to_string(v.back()) + " but T is " + std::to_string(l.s));
  l.ends = v, l.b = static_cast<int64_t>(v.size());
}

struct Sizes {
  Layout q, k, v;
  int64_t sparse_mode, pre_tokens, next_tokens;
  float scale;
  // Mask strides over (b, n, s1, s2); none when no mask restricts mode 0.
  bool masked = false;
  int64_t mask_b = 0, mask_n = 0;
  // The first of the 8 equal statistics of (b, n, row i).
  int64_t stat(int64_t b, int64_t n, int64_t i) const {
    return (q.name == "TND" ? (q.begin(b) + i) * q.n + n : (b * q.n + n) * q.s + i) * 8;
  }
};

Sizes check_common(const aclTensor& q, const aclTensor& key, const aclTensor& value, const aclTensor* mask,
                   const aclTensor* real_shift, const aclTensor* drop_mask, const aclTensor* padding_mask,
                   const aclIntArray* prefix, double scale, double keep_prob, int64_t pre_tokens,
                   int64_t next_tokens, int64_t head_num, const char* input_layout, int64_t sparse_mode,
                   bool varlen, const aclIntArray* q_lengths, const aclIntArray* kv_lengths) {
  if (input_layout == nullptr) fail(kErrParamNullptr, "inputLayout is NULL");
  const std::string name = input_layout;
  if (varlen && name != "TND") fail(kErrParamInvalid, "inputLayout " + name + " not supported (TND only)");
  if (!varlen && name == "TND")
    fail(kErrParamInvalid, "inputLayout TND is the VarLen and Unpadding functions'");
  if (!varlen && name != "BSND" && name != "BNSD" && name != "BSH" && name != "SBH")
    fail(kErrParamInvalid, "inputLayout " + name + " not supported (BSND, BNSD, BSH, SBH)");
  check_dtype(q, "query", {ACL_FLOAT16, ACL_BF16, ACL_FLOAT});
  check_same_dtype(key, "key", q, "query");
  check_same_dtype(value, "value", q, "query");
  if (real_shift != nullptr || padding_mask != nullptr || prefix != nullptr)
    fail(kErrParamInvalid, "realShift, paddingMask and prefix are not emulated");
  if (keep_prob != 1.0 || drop_mask != nullptr) fail(kErrParamInvalid, "dropout (keepProb < 1) is not emulated");
  if (sparse_mode != 0 && sparse_mode != 2 && sparse_mode != 3)
    fail(kErrParamInvalid, "sparseMode " + std::to_string(sparse_mode) + " is not emulated (0, 2, 3)");
  const Product p = product();
  if (p != Product::kA2 && p != Product::kA3 && p != Product::k950) fail_product();
  Sizes z{read_layout(q, name, "query"), read_layout(key, name, "key"), read_layout(value, name, "value"),
          sparse_mode, pre_tokens, next_tokens, static_cast<float>(scale)};
  if (head_num < 1) fail(kErrParamInvalid, "headNum must be >= 1");
  if (varlen) {
    read_lengths(q_lengths, "actualSeqQLenOptional", z.q);
    read_lengths(kv_lengths, "actualSeqKvLenOptional", z.k);
    z.v.ends = z.k.ends, z.v.b = z.k.b;
    if (z.q.b != z.k.b)
      fail(kErrTiling, "actualSeqQLenOptional and actualSeqKvLenOptional must count the same B");
    if (mask != nullptr && sparse_mode == 0)
      fail(kErrParamInvalid, "attenMaskOptional in TND is not emulated");
    for (int64_t b = 0; b < z.q.b; ++b) {
      if (sparse_mode == 3 && z.q.rows(b) > z.k.rows(b))
        fail(kErrTiling, "sparseMode 3 needs S1 <= S2 in every batch; batch " + std::to_string(b) + " has " +
                             std::to_string(z.q.rows(b)) + " > " + std::to_string(z.k.rows(b)));
    }
  }
  if (z.q.e == 1 && (name == "BSH" || name == "SBH")) {
    if (z.q.n % head_num != 0) fail(kErrTiling, "query H1 not a multiple of headNum");
    z.q.e = z.q.n / head_num, z.q.n = head_num;
    if (z.q.e < 1 || z.k.n % z.q.e != 0) fail(kErrTiling, "key H2 not a multiple of D");
    z.k.e = z.q.e, z.k.n /= z.q.e;
    if (z.k.n < 1 || z.v.n % z.k.n != 0) fail(kErrTiling, "value Hv not a multiple of N2");
    z.v.e = z.v.n / z.k.n, z.v.n = z.k.n;
  }
  if (z.q.n != head_num) fail(kErrTiling, "query N1 must equal headNum");
  if (z.k.n < 1 || z.q.n % z.k.n != 0 || z.v.n != z.k.n) fail(kErrTiling, "N2 must divide N1, key and value alike");
  if (z.k.e != z.q.e) fail(kErrTiling, "key D must equal query D");
  if (z.k.b != z.q.b || z.v.b != z.q.b || z.v.s != z.k.s) fail(kErrTiling, "B and S2 must agree");
  if (z.q.e < 1 || z.q.e > kMaxHeadDim || z.v.e < 1 || z.v.e > kMaxHeadDim)
    fail(kErrTiling, "head dims D and Dv must be in 1..768");
  if (numel(q) == 0 || numel(key) == 0) fail(kErrTiling, "empty query or key is not supported");
  if (sparse_mode != 0) {
    check_shape(need(mask, "attenMaskOptional"), "attenMaskOptional", {kCausalMaskSide, kCausalMaskSide},
                "sparseMode 2 and 3 take the 2048 x 2048 causal mask");
  } else if (mask != nullptr) {
    const int64_t s1 = z.q.s, s2 = z.k.s;
    z.masked = true;
    if (mask->dims == std::vector<int64_t>{s1, s2}) {
    } else if (mask->dims == std::vector<int64_t>{z.q.b, 1, s1, s2}) {
      z.mask_b = s1 * s2;
    } else if (mask->dims == std::vector<int64_t>{z.q.b, z.q.n, s1, s2}) {
      z.mask_b = z.q.n * s1 * s2, z.mask_n = s1 * s2;
    } else {
      fail(kErrTiling, "attenMaskOptional shape " + shape_text(mask->dims) +
                           " must be [S1, S2], [B, 1, S1, S2] or [B, N1, S1, S2]");
    }
  }
  if (mask != nullptr) check_dtype(*mask, "attenMaskOptional", {ACL_BOOL, ACL_UINT8});
  return z;
}

// The mask as read at launch: mode 0's as given, modes 2 and 3's checked to be the causal one.
std::vector<int64_t> read_mask(const Sizes& z, const aclTensor* mask) {
  if (mask == nullptr) return {};
  std::vector<int64_t> m = read_ints(*mask);
  if (z.sparse_mode == 0) return m;
  for (int64_t i = 0; i < kCausalMaskSide; ++i) {
    for (int64_t j = 0; j < kCausalMaskSide; ++j) {
      if ((m[i * kCausalMaskSide + j] != 0) != (j > i))
        fail(kErrParamInvalid, "attenMaskOptional is not the 2048 x 2048 causal mask (1 above the diagonal)");
    }
  }
  return {};
}

bool allowed(const Sizes& z, const std::vector<int64_t>& mask, int64_t b, int64_t n, int64_t i, int64_t j) {
  if (z.sparse_mode == 2) return j <= i;
  if (z.sparse_mode == 3) return j <= i + z.k.rows(b) - z.q.rows(b);
  if (!z.masked) return true;
  if (mask[b * z.mask_b + n * z.mask_n + i * z.k.s + j] != 0) return false;
  return j >= i - z.pre_tokens && j <= i + z.next_tokens;
}

// Probabilities of one (b, n, row i) over S2 keys, with the row max and sum (p all 0 when no key).
void row_probabilities(const Sizes& z, const std::vector<int64_t>& mask, const std::vector<float>& q,
                       const std::vector<float>& key, int64_t b, int64_t n, int64_t i, std::vector<float>& p,
                       float& row_max, float& row_sum) {
  const int64_t n2 = n / (z.q.n / z.k.n);
  p.assign(static_cast<size_t>(z.k.rows(b)), -std::numeric_limits<float>::infinity());
  row_max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < z.k.rows(b); ++j) {
    if (!allowed(z, mask, b, n, i, j)) continue;
    float dot = 0.0f;
    for (int64_t e = 0; e < z.q.e; ++e) dot += q[z.q.at(b, i, n, e)] * key[z.k.at(b, j, n2, e)];
    p[j] = z.scale * dot;
    row_max = std::max(row_max, p[j]);
  }
  row_sum = 0.0f;
  for (float& x : p) {
    x = std::isinf(row_max) ? 0.0f : std::exp(x - row_max);
    row_sum += x;
  }
  if (row_sum > 0.0f)
    for (float& x : p) x /= row_sum;
}

// P and dS as the products take them: rounded to bfloat16 for bfloat16 inputs, as the vendor's cube
// and torch's kernels multiply them (float16's stay float32: its dS would lose its small values).
float as_operand(float v, aclDataType dtype) { return dtype == ACL_BF16 ? bf16_to_float(float_to_bf16(v)) : v; }

void forward(const Sizes& z, const aclTensor* q_p, const aclTensor* k_p, const aclTensor* v_p,
             const aclTensor* mask_p, const aclTensor* max_p, const aclTensor* sum_p, const aclTensor* out_p) {
  const std::vector<int64_t> mask = read_mask(z, mask_p);
  const std::vector<float> q = read_floats(*q_p), key = read_floats(*k_p), value = read_floats(*v_p);
  std::vector<float> out(static_cast<size_t>(numel(*out_p)), 0.0f);
  std::vector<float> maxes(static_cast<size_t>(numel(*max_p))), sums(maxes.size());
  const Layout o{z.q.name, z.q.b, z.q.s, z.q.n, z.v.e, z.q.ends};
  std::vector<float> p;
  for (int64_t b = 0; b < z.q.b; ++b) {
    for (int64_t n = 0; n < z.q.n; ++n) {
      const int64_t n2 = n / (z.q.n / z.k.n);
      for (int64_t i = 0; i < z.q.rows(b); ++i) {
        float row_max, row_sum;
        row_probabilities(z, mask, q, key, b, n, i, p, row_max, row_sum);
        for (int64_t j = 0; j < z.k.rows(b); ++j) {
          if (p[j] == 0.0f) continue;
          const float pj = as_operand(p[j], q_p->dtype);
          for (int64_t e = 0; e < z.v.e; ++e) out[o.at(b, i, n, e)] += pj * value[z.v.at(b, j, n2, e)];
        }
        const int64_t stat = z.stat(b, n, i);
        std::fill_n(&maxes[stat], 8, row_max);
        std::fill_n(&sums[stat], 8, row_sum);
      }
    }
  }
  write_floats(*out_p, out);
  write_floats(*max_p, maxes);
  write_floats(*sum_p, sums);
}

std::vector<int64_t> stats_shape(const Sizes& z) {
  return z.q.name == "TND" ? std::vector<int64_t>{z.q.s, z.q.n, 8}
                           : std::vector<int64_t>{z.q.b, z.q.n, z.q.s, 8};
}
const char* stats_rule(const Sizes& z) { return z.q.name == "TND" ? "[T1, N1, 8]" : "[B, N1, S1, 8]"; }

Plan flash_attention_score(const aclTensor* q_p, const aclTensor* k_p, const aclTensor* v_p,
                           const aclTensor* real_shift, const aclTensor* drop_mask,
                           const aclTensor* padding_mask, const aclTensor* mask_p, const aclIntArray* prefix,
                           double scale, double keep_prob, int64_t pre_tokens, int64_t next_tokens,
                           int64_t head_num, const char* input_layout, int64_t inner_precise,
                           int64_t sparse_mode, const aclTensor* max_p, const aclTensor* sum_p,
                           const aclTensor* softmax_out, const aclTensor* out_p, bool varlen = false,
                           const aclIntArray* q_lengths = nullptr, const aclIntArray* kv_lengths = nullptr) {
  const aclTensor& q = need(q_p, "query");
  const aclTensor& key = need(k_p, "key");
  const aclTensor& value = need(v_p, "value");
  const aclTensor& out = need(out_p, "attentionOutOut");
  if (mask_p != nullptr) need(mask_p, "attenMaskOptional");
  if (inner_precise < 0 || inner_precise > 3) fail(kErrParamInvalid, "innerPrecise not in 0..3");
  if (softmax_out != nullptr && numel(need(softmax_out, "softmaxOutOut")) != 0)
    fail(kErrParamInvalid, "softmaxOutOut is reserved: pass an empty tensor or NULL");
  const Sizes z = check_common(q, key, value, mask_p, real_shift, drop_mask, padding_mask, prefix, scale,
                               keep_prob, pre_tokens, next_tokens, head_num, input_layout, sparse_mode,
                               varlen, q_lengths, kv_lengths);
  check_same_dtype(out, "attentionOutOut", q, "query");
  std::vector<int64_t> want = q.dims;
  want.back() = z.q.e == q.dims.back() ? z.v.e : z.q.n * z.v.e;
  check_shape(out, "attentionOutOut", want, "query's with Dv");
  for (const auto& [t, what] : {std::pair{max_p, "softmaxMaxOut"}, std::pair{sum_p, "softmaxSumOut"}}) {
    check_dtype(need(t, what), what, {ACL_FLOAT});
    check_shape(*t, what, stats_shape(z), stats_rule(z));
  }
  std::vector<const aclTensor*> inputs{q_p, k_p, v_p}, outputs{max_p, sum_p, out_p};
  if (mask_p != nullptr) inputs.push_back(mask_p);
  for (const aclTensor* t : inputs) check_contiguous(*t, "every input");
  for (const aclTensor* t : outputs) check_contiguous(*t, "every output");
  return Plan{inputs, outputs, [=] { forward(z, q_p, k_p, v_p, mask_p, max_p, sum_p, out_p); }};
}

// dS = P (dP - rowsum(dy * attention_in)), dq = scale dS k, dk = scale dS^T q, dv = P^T dy; the
// probabilities recomputed from the forward's statistics' inputs as the device does, P and dS
// multiplied as as_operand rounds them.
void backward(const Sizes& z, const aclTensor* q_p, const aclTensor* k_p, const aclTensor* v_p,
              const aclTensor* dy_p, const aclTensor* mask_p, const aclTensor* in_p, const aclTensor* dq_p,
              const aclTensor* dk_p, const aclTensor* dv_p) {
  const std::vector<int64_t> mask = read_mask(z, mask_p);
  const std::vector<float> q = read_floats(*q_p), key = read_floats(*k_p), value = read_floats(*v_p);
  const std::vector<float> dy = read_floats(*dy_p), attention_in = read_floats(*in_p);
  std::vector<float> dq(q.size(), 0.0f), dk(key.size(), 0.0f), dv(value.size(), 0.0f);
  const Layout o{z.q.name, z.q.b, z.q.s, z.q.n, z.v.e, z.q.ends};
  std::vector<float> p;
  for (int64_t b = 0; b < z.q.b; ++b) {
    for (int64_t n = 0; n < z.q.n; ++n) {
      const int64_t n2 = n / (z.q.n / z.k.n);
      for (int64_t i = 0; i < z.q.rows(b); ++i) {
        float row_max, row_sum;
        row_probabilities(z, mask, q, key, b, n, i, p, row_max, row_sum);
        float drow = 0.0f;
        for (int64_t e = 0; e < z.v.e; ++e) drow += dy[o.at(b, i, n, e)] * attention_in[o.at(b, i, n, e)];
        for (int64_t j = 0; j < z.k.rows(b); ++j) {
          if (p[j] == 0.0f) continue;
          const float pj = as_operand(p[j], q_p->dtype);
          float dp = 0.0f;
          for (int64_t e = 0; e < z.v.e; ++e) {
            dp += dy[o.at(b, i, n, e)] * value[z.v.at(b, j, n2, e)];
            dv[z.v.at(b, j, n2, e)] += pj * dy[o.at(b, i, n, e)];
          }
          const float ds = z.scale * as_operand(p[j] * (dp - drow), q_p->dtype);
          for (int64_t e = 0; e < z.q.e; ++e) {
            dq[z.q.at(b, i, n, e)] += ds * key[z.k.at(b, j, n2, e)];
            dk[z.k.at(b, j, n2, e)] += ds * q[z.q.at(b, i, n, e)];
          }
        }
      }
    }
  }
  write_floats(*dq_p, dq);
  write_floats(*dk_p, dk);
  write_floats(*dv_p, dv);
}

Plan flash_attention_score_grad(const aclTensor* q_p, const aclTensor* k_p, const aclTensor* v_p,
                                const aclTensor* dy_p, const aclTensor* pse_shift, const aclTensor* drop_mask,
                                const aclTensor* padding_mask, const aclTensor* mask_p,
                                const aclTensor* max_p, const aclTensor* sum_p, const aclTensor* softmax_in,
                                const aclTensor* in_p, const aclIntArray* prefix, double scale,
                                double keep_prob, int64_t pre_tokens, int64_t next_tokens, int64_t head_num,
                                const char* input_layout, int64_t inner_precise, int64_t sparse_mode,
                                const aclTensor* dq_p, const aclTensor* dk_p, const aclTensor* dv_p,
                                const aclTensor* dpse, bool varlen = false,
                                const aclIntArray* q_lengths = nullptr,
                                const aclIntArray* kv_lengths = nullptr) {
  const aclTensor& q = need(q_p, "query");
  const aclTensor& key = need(k_p, "key");
  const aclTensor& value = need(v_p, "value");
  if (mask_p != nullptr) need(mask_p, "attenMaskOptional");
  if (inner_precise < 0 || inner_precise > 3) fail(kErrParamInvalid, "innerPrecise not in 0..3");
  if (softmax_in != nullptr && numel(need(softmax_in, "softmaxInOptional")) != 0)
    fail(kErrParamInvalid, "softmaxInOptional is reserved: pass an empty tensor or NULL");
  if (dpse != nullptr && numel(need(dpse, "dpseOut")) != 0) fail(kErrParamInvalid, "dpseOut without pse");
  const Sizes z = check_common(q, key, value, mask_p, pse_shift, drop_mask, padding_mask, prefix, scale,
                               keep_prob, pre_tokens, next_tokens, head_num, input_layout, sparse_mode,
                               varlen, q_lengths, kv_lengths);
  std::vector<int64_t> out_dims = q.dims;
  out_dims.back() = z.q.e == q.dims.back() ? z.v.e : z.q.n * z.v.e;
  for (const auto& [t, what] : {std::pair{dy_p, "dy"}, std::pair{in_p, "attentionInOptional"}}) {
    check_same_dtype(need(t, what), what, q, "query");
    check_shape(*t, what, out_dims, "attentionOut's shape");
  }
  for (const auto& [t, what] : {std::pair{max_p, "softmaxMaxOptional"}, std::pair{sum_p, "softmaxSumOptional"}}) {
    check_dtype(need(t, what), what, {ACL_FLOAT});
    check_shape(*t, what, stats_shape(z), stats_rule(z));
  }
  const std::pair<const aclTensor*, const aclTensor*> grads[] = {{dq_p, q_p}, {dk_p, k_p}, {dv_p, v_p}};
  for (const auto& [grad, like] : grads) {
    check_same_dtype(need(grad, "dqOut, dkOut, dvOut"), "dqOut, dkOut, dvOut", q, "query");
    check_shape(*grad, "dqOut, dkOut, dvOut", like->dims, "their input's shape");
  }
  std::vector<const aclTensor*> inputs{q_p, k_p, v_p, dy_p, max_p, sum_p, in_p}, outputs{dq_p, dk_p, dv_p};
  if (mask_p != nullptr) inputs.push_back(mask_p);
  for (const aclTensor* t : inputs) check_contiguous(*t, "every input");
  for (const aclTensor* t : outputs) check_contiguous(*t, "every output");
  return Plan{inputs, outputs, [=] { backward(z, q_p, k_p, v_p, dy_p, mask_p, in_p, dq_p, dk_p, dv_p); }};
}

}  // namespace

ACLEMU_API aclnnStatus aclnnFlashAttentionScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclIntArray* prefixOptional, double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens,
    int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode, const aclTensor* softmaxMaxOut,
    const aclTensor* softmaxSumOut, const aclTensor* softmaxOutOut, const aclTensor* attentionOutOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnFlashAttentionScoreGetWorkspaceSize", "aclnnFlashAttentionScore", workspaceSize, executor,
                 [&] {
                   return flash_attention_score(query, key, value, realShiftOptional, dropMaskOptional,
                                                paddingMaskOptional, attenMaskOptional, prefixOptional,
                                                scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout,
                                                innerPrecise, sparseMode, softmaxMaxOut, softmaxSumOut,
                                                softmaxOutOut, attentionOutOut);
                 });
}

ACLEMU_API aclnnStatus aclnnFlashAttentionScore(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                                aclrtStream stream) {
  return launch("aclnnFlashAttentionScore", workspace, workspaceSize, executor, stream);
}

ACLEMU_API aclnnStatus aclnnFlashAttentionScoreGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional, const aclIntArray* prefixOptional,
    double scaleValue, double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout,
    int64_t innerPrecise, int64_t sparseMode, const aclTensor* dqOut, const aclTensor* dkOut,
    const aclTensor* dvOut, const aclTensor* dpseOut, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnFlashAttentionScoreGradGetWorkspaceSize", "aclnnFlashAttentionScoreGrad", workspaceSize,
                 executor, [&] {
                   return flash_attention_score_grad(
                       query, key, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional,
                       attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional,
                       attentionInOptional, prefixOptional, scaleValue, keepProb, preTokens, nextTokens, headNum,
                       inputLayout, innerPrecise, sparseMode, dqOut, dkOut, dvOut, dpseOut);
                 });
}

ACLEMU_API aclnnStatus aclnnFlashAttentionScoreGrad(void* workspace, uint64_t workspaceSize,
                                                    aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnFlashAttentionScoreGrad", workspace, workspaceSize, executor, stream);
}

// TND: the same first phases with the lengths after prefixOptional.
ACLEMU_API aclnnStatus aclnnFlashAttentionVarLenScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* realShiftOptional,
    const aclTensor* dropMaskOptional, const aclTensor* paddingMaskOptional,
    const aclTensor* attenMaskOptional, const aclIntArray* prefixOptional,
    const aclIntArray* actualSeqQLenOptional, const aclIntArray* actualSeqKvLenOptional, double scaleValue,
    double keepProb, int64_t preTokens, int64_t nextTokens, int64_t headNum, char* inputLayout,
    int64_t innerPrecise, int64_t sparseMode, const aclTensor* softmaxMaxOut, const aclTensor* softmaxSumOut,
    const aclTensor* softmaxOutOut, const aclTensor* attentionOutOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepare("aclnnFlashAttentionVarLenScoreGetWorkspaceSize", "aclnnFlashAttentionVarLenScore",
                 workspaceSize, executor, [&] {
                   return flash_attention_score(
                       query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional,
                       attenMaskOptional, prefixOptional, scaleValue, keepProb, preTokens, nextTokens,
                       headNum, inputLayout, innerPrecise, sparseMode, softmaxMaxOut, softmaxSumOut,
                       softmaxOutOut, attentionOutOut, true, actualSeqQLenOptional, actualSeqKvLenOptional);
                 });
}

ACLEMU_API aclnnStatus aclnnFlashAttentionVarLenScore(void* workspace, uint64_t workspaceSize,
                                                      aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnFlashAttentionVarLenScore", workspace, workspaceSize, executor, stream);
}

ACLEMU_API aclnnStatus aclnnFlashAttentionUnpaddingScoreGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* keyIn, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pseShiftOptional, const aclTensor* dropMaskOptional,
    const aclTensor* paddingMaskOptional, const aclTensor* attenMaskOptional,
    const aclTensor* softmaxMaxOptional, const aclTensor* softmaxSumOptional,
    const aclTensor* softmaxInOptional, const aclTensor* attentionInOptional,
    const aclIntArray* prefixOptional, const aclIntArray* actualSeqQLenOptional,
    const aclIntArray* actualSeqKvLenOptional, double scaleValue, double keepProb, int64_t preTokens,
    int64_t nextTokens, int64_t headNum, char* inputLayout, int64_t innerPrecise, int64_t sparseMode,
    const aclTensor* dqOut, const aclTensor* dkOut, const aclTensor* dvOut, const aclTensor* dpseOut,
    uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnFlashAttentionUnpaddingScoreGradGetWorkspaceSize",
                 "aclnnFlashAttentionUnpaddingScoreGrad", workspaceSize, executor, [&] {
                   return flash_attention_score_grad(
                       query, keyIn, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional,
                       attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional,
                       attentionInOptional, prefixOptional, scaleValue, keepProb, preTokens, nextTokens,
                       headNum, inputLayout, innerPrecise, sparseMode, dqOut, dkOut, dvOut, dpseOut, true,
                       actualSeqQLenOptional, actualSeqKvLenOptional);
                 });
}

ACLEMU_API aclnnStatus aclnnFlashAttentionUnpaddingScoreGrad(void* workspace, uint64_t workspaceSize,
                                                             aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnFlashAttentionUnpaddingScoreGrad", workspace, workspaceSize, executor, stream);
}

static_assert(std::is_same_v<decltype(&aclnnFlashAttentionScoreGetWorkspaceSize),
                             oao::acl::FlashAttentionScorePrepare>);
static_assert(std::is_same_v<decltype(&aclnnFlashAttentionScore), oao::acl::Launch>);
static_assert(std::is_same_v<decltype(&aclnnFlashAttentionScoreGradGetWorkspaceSize),
                             oao::acl::FlashAttentionScoreGradPrepare>);
static_assert(std::is_same_v<decltype(&aclnnFlashAttentionScoreGrad), oao::acl::Launch>);
static_assert(std::is_same_v<decltype(&aclnnFlashAttentionVarLenScoreGetWorkspaceSize),
                             oao::acl::FlashAttentionVarLenScorePrepare>);
static_assert(std::is_same_v<decltype(&aclnnFlashAttentionVarLenScore), oao::acl::Launch>);
static_assert(std::is_same_v<decltype(&aclnnFlashAttentionUnpaddingScoreGradGetWorkspaceSize),
                             oao::acl::FlashAttentionUnpaddingScoreGradPrepare>);
static_assert(std::is_same_v<decltype(&aclnnFlashAttentionUnpaddingScoreGrad), oao::acl::Launch>);
