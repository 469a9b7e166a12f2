// What FlashAttentionScore and its grad look like to ONNX Runtime on every execution provider:
// slot types, attributes and the contract's rules (layouts BSND, BNSD, BSH, SBH, TND; N1 % N2 == 0;
// atten_mask only with sparse_mode 0 outside TND; TND's cumulative lengths), and the geometry the
// kernels read the tensors in place with.
#pragma once

#include <climits>
#include <optional>
#include <string>

#include "kernels/flash_attention_score_tiles.h"
#include "ort/io.h"
#include "ort/schema.h"

namespace oao {

// A tensor's extents as its layout names them: batch B, rows S (TND: T), heads N, head dim E.
struct FaExtents {
  int64_t b = 0, s = 0, n = 0, e = 0;
};

class FlashAttentionChecks {
 public:
  // Schema (schema::FlashAttentionScore or schema::FlashAttentionScoreGrad) holds the choices.
  template <class Schema>
  FlashAttentionChecks(const char* op, const std::string& layout, int64_t sparse_mode, float keep_prob,
                       std::optional<int64_t> head_num, Schema)
      : op_(op), layout_(layout) {
    fail(choice_error("input_layout", layout, Schema::kInputLayoutChoices));
    fail(choice_error("sparse_mode", sparse_mode, Schema::kSparseModeChoices));
    fail(choice_error("keep_prob", keep_prob, Schema::kKeepProbChoices));
    if (!head_num) {
      fail("attribute 'head_num' is required");
    } else if (*head_num < 1) {
      fail("attribute 'head_num' is " + std::to_string(*head_num) + "; it must be >= 1 (N1 = 0 is an error)");
    }
    head_num_ = head_num.value_or(0);
  }

  bool tnd() const { return layout_ == "TND"; }
  bool merged_heads() const { return layout_ == "BSH" || layout_ == "SBH"; }

  // query, key and value fix B (TND: T1, T2), S1, S2, N1, N2, D, Dv and the strides of all four
  // tensors (attention_out: query's with Dv).
  void query_key_value(const Shape& query, const Shape& key, const Shape& value, FlashAttentionGeometry& g) {
    if (!ok()) return;
    const size_t rank = tnd() || merged_heads() ? 3 : 4;
    const std::pair<const char*, const Shape*> inputs[] = {
        {"query", &query}, {"key", &key}, {"value", &value}};
    for (const auto& [name, shape] : inputs) {
      if (shape->size() != rank) {
        return fail("input_layout " + layout_ + " needs input '" + name + "' of rank " +
                    std::to_string(rank) + ", got " + shape_str(*shape));
      }
    }
    q_ = extents(query), k_ = extents(key), v_ = extents(value);
    if (merged_heads()) {
      split_heads(query, key, value);
    } else {
      named_heads(query, key, value);
    }
    if (!ok()) return;
    if (!tnd() && (k_.b != q_.b || v_.b != q_.b)) {
      return fail("inputs 'query' " + shape_str(query) + ", 'key' " + shape_str(key) + " and 'value' " +
                  shape_str(value) + " must share the batch B");
    }
    if (v_.s != k_.s) {
      return fail("inputs 'key' " + shape_str(key) + " and 'value' " + shape_str(value) + " must share " +
                  (tnd() ? "T2" : "S2"));
    }
    g.n1 = q_.n, g.n2 = k_.n, g.d = q_.e, g.dv = v_.e;
    g.packed = tnd();
    g.query = strides(q_), g.key = strides(k_), g.value = strides(v_);
    g.out = strides({q_.b, q_.s, q_.n, v_.e});
    g.stats = tnd() ? FaStrides{0, 8, mul({q_.n, 8})} : FaStrides{mul({q_.n, q_.s, 8}), mul({q_.s, 8}), 8};
    // Batches that hold neither query nor key rows are left out: an empty tensor may claim any
    // number of them.
    if (!tnd() && (q_.s > 0 || k_.s > 0)) {
      for (int64_t b = 1; b <= q_.b; ++b) {
        g.spans.query_end.push_back(b * q_.s);
        g.spans.key_end.push_back(b * k_.s);
      }
    }
  }

  // attention_out's shape (query's, with Dv head dims) and the statistics' ([B, N1, S1, 8] or
  // [T1, N1, 8]); valid once query_key_value passed.
  Shape out_shape(const Shape& query) const {
    Shape out = query;
    out.back() = merged_heads() ? q_.n * v_.e : v_.e;
    return out;
  }
  Shape stats_shape() const { return tnd() ? Shape{q_.s, q_.n, 8} : Shape{q_.b, q_.n, q_.s, 8}; }

  // atten_mask: bool or uint8, [S1, S2], [B, 1, S1, S2] or [B, N1, S1, S2], sparse_mode 0 only,
  // not in TND.
  void mask(const std::optional<Io::Untyped>& mask, int64_t sparse_mode, FlashAttentionGeometry& g) {
    if (!ok() || !mask) return;
    if (mask->type != ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL && mask->type != ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8)
      return fail("input 'atten_mask' must be bool or uint8");
    if (tnd()) return fail("input_layout TND takes no input 'atten_mask' (the lengths bound each batch)");
    if (sparse_mode != 0) {
      return fail("input 'atten_mask' is taken only with sparse_mode 0; sparse_mode " +
                  std::to_string(sparse_mode) + " builds its own causal mask");
    }
    const Shape& m = mask->shape;
    const int64_t s1 = q_.s, s2 = k_.s;
    if (m == Shape{s1, s2}) {
      g.mask = {0, 0, s2};
    } else if (m == Shape{q_.b, 1, s1, s2}) {
      g.mask = {mul({s1, s2}), 0, s2};
    } else if (m == Shape{q_.b, q_.n, s1, s2}) {
      g.mask = {mul({q_.n, s1, s2}), mul({s1, s2}), s2};
    } else {
      return fail("input 'atten_mask' has shape " + shape_str(m) + "; it must be [S1, S2] = " +
                  shape_str({s1, s2}) + ", [B, 1, S1, S2] = " + shape_str({q_.b, 1, s1, s2}) +
                  " or [B, N1, S1, S2] = " + shape_str({q_.b, q_.n, s1, s2}));
    }
    g.masked = true;
  }

  // TND's cumulative lengths (B values, no leading zero, non-decreasing, ending at T1 or T2), int64
  // or int32; the other layouts take none.
  void lengths(const char* name, const std::optional<Io::Untyped>& input, int64_t total,
               std::vector<int64_t>& ends) {
    if (!ok()) return;
    if (!tnd()) {
      if (input) fail("input_layout " + layout_ + " takes no input '" + name + "' (TND only)");
      return;
    }
    if (!input) return fail(std::string("input_layout TND needs input '") + name + "'");
    if (input->type != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 &&
        input->type != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)
      return fail(std::string("input '") + name + "' must be int64 or int32");
    const int64_t count = element_count(input->shape);
    if (input->shape.size() != 1 || count < 1)
      return fail(std::string("input '") + name + "' has shape " + shape_str(input->shape) +
                  "; it must be 1-D with one value per batch");
    ends.resize(count);
    for (int64_t b = 0; b < count; ++b) {
      ends[b] = input->type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64
                    ? static_cast<const int64_t*>(input->data)[b]
                    : static_cast<const int32_t*>(input->data)[b];
      if (ends[b] < (b == 0 ? 0 : ends[b - 1])) {
        return fail(std::string("input '") + name + "' holds " + std::to_string(ends[b]) + " at batch " +
                    std::to_string(b) + "; it must be cumulative ends, non-decreasing from 0");
      }
    }
    if (ends.back() != total) {
      fail(std::string("input '") + name + "' ends at " + std::to_string(ends.back()) +
           " but the tensors have " + std::to_string(total) + " rows");
    }
  }

  void same_batches(const FlashAttentionGeometry& g) {
    if (ok() && g.spans.query_end.size() != g.spans.key_end.size()) {
      fail("inputs 'actual_seq_lengths_query' (" + std::to_string(g.spans.query_end.size()) +
           " values) and 'actual_seq_lengths_kv' (" + std::to_string(g.spans.key_end.size()) +
           ") must have one value per batch each");
    }
  }

  // An input that must have shape `want` (the grad's dy, attention_in and statistics).
  void shaped(const char* name, const Shape& shape, const Shape& want, const std::string& rule) {
    if (ok() && shape != want)
      fail(std::string("input '") + name + "' has shape " + shape_str(shape) + "; it must be " +
           shape_str(want) + " (" + rule + ")");
  }

  bool ok() const { return error_.empty(); }
  Ort::Status status() const { return ok() ? Ort::Status(nullptr) : op_error(op_, error_); }
  const FaExtents& query() const { return q_; }
  const FaExtents& key() const { return k_; }

 private:
  void fail(const std::string& message) {
    if (ok()) error_ = message;
  }

  // B, S and the axis that holds heads (N, or H = N * E in BSH/SBH, E = 1 then until split).
  FaExtents extents(const Shape& s) const {
    if (layout_ == "BSND") return {s[0], s[1], s[2], s[3]};
    if (layout_ == "BNSD") return {s[0], s[2], s[1], s[3]};
    if (layout_ == "BSH") return {s[0], s[1], s[2], 1};
    if (layout_ == "SBH") return {s[1], s[0], s[2], 1};
    return {1, s[0], s[1], s[2]};  // TND
  }

  // BSND, BNSD, TND: heads and head dims as the shapes give them.
  void named_heads(const Shape& query, const Shape& key, const Shape& value) {
    if (q_.n != head_num_) {
      return fail("attribute 'head_num' is " + std::to_string(head_num_) + " but input 'query' " +
                  shape_str(query) + " has N1 = " + std::to_string(q_.n) + " heads");
    }
    if (k_.n < 1 || q_.n % k_.n != 0) {
      return fail("input 'key' " + shape_str(key) + " has N2 = " + std::to_string(k_.n) +
                  " heads; N2 must divide N1 = " + std::to_string(q_.n));
    }
    if (v_.n != k_.n) {
      return fail("inputs 'key' " + shape_str(key) + " and 'value' " + shape_str(value) +
                  " must have the same heads N2");
    }
    if (k_.e != q_.e) {
      return fail("inputs 'query' " + shape_str(query) + " and 'key' " + shape_str(key) +
                  " must share the head dim D");
    }
    head_dims();
  }

  // BSH, SBH: D = H1 / N1, N2 = H2 / D, Dv = Hv / N2, each division exact.
  void split_heads(const Shape& query, const Shape& key, const Shape& value) {
    const int64_t h1 = q_.n, h2 = k_.n, hv = v_.n;
    if (h1 % head_num_ != 0) {
      return fail("input 'query' " + shape_str(query) + " has H1 = " + std::to_string(h1) +
                  ", not a multiple of head_num = " + std::to_string(head_num_));
    }
    q_.n = head_num_, q_.e = h1 / head_num_;
    if (q_.e < 1) return head_dims();
    if (h2 % q_.e != 0 || h2 == 0 || head_num_ % (h2 / q_.e) != 0) {
      return fail("input 'key' " + shape_str(key) + " has H2 = " + std::to_string(h2) +
                  "; it must be N2 * D (D = " + std::to_string(q_.e) +
                  ") with N2 >= 1 dividing N1 = " + std::to_string(head_num_));
    }
    k_.n = h2 / q_.e, k_.e = q_.e;
    if (hv % k_.n != 0) {
      return fail("input 'value' " + shape_str(value) + " has Hv = " + std::to_string(hv) +
                  ", not a multiple of N2 = " + std::to_string(k_.n));
    }
    v_.n = k_.n, v_.e = hv / k_.n;
    head_dims();
  }

  // Without head dims, nothing in memory would bound the loops over rows that empty tensors can
  // still claim.
  void head_dims() {
    if (q_.e < 1) return fail("input 'query' must have head dim D >= 1 (D = 0 is an error)");
    if (v_.e < 1) fail("input 'value' must have head dim Dv >= 1 (Dv = 0 is an error)");
  }

  // Element strides of a tensor of these extents in the layout.
  FaStrides strides(const FaExtents& x) const {
    if (layout_ == "BNSD") return {mul({x.n, x.s, x.e}), mul({x.s, x.e}), x.e};
    if (layout_ == "SBH") return {mul({x.n, x.e}), x.e, mul({x.b, x.n, x.e})};
    if (tnd()) return {0, x.e, mul({x.n, x.e})};
    return {mul({x.s, x.n, x.e}), x.e, mul({x.n, x.e})};  // BSND, BSH
  }

  // A product of extents; an error past int64 (an empty tensor may claim vast ones).
  static int64_t mul(const Shape& factors) { return element_count(factors); }

  const char* op_;
  std::string layout_;
  int64_t head_num_ = 0;
  FaExtents q_, k_, v_;
  std::string error_;
};

// Lengths as the checks read them: host memory on every execution provider (their slots are host
// inputs: aclnn takes them as host aclIntArrays).
using FaHostLengths = std::optional<Io::Untyped>;

// What both ops share: the attributes (Schema: their defaults and choices), the mask, lengths,
// geometry and output shapes in their Args, read, and the rules on query, key, value, mask and
// lengths around Op::check_rest, the op's own.
template <class Op, class Schema>
struct FlashAttentionBase : Signature {
  explicit FlashAttentionBase(const OrtKernelInfo* info)
      : head_num(attribute<int64_t>(info, "head_num")),
        input_layout(attribute<std::string>(info, "input_layout").value_or(Schema::kInputLayout)),
        scale_value(attribute<float>(info, "scale_value").value_or(Schema::kScaleValue)),
        sparse_mode(attribute<int64_t>(info, "sparse_mode").value_or(Schema::kSparseMode)),
        pre_tokens(attribute<int64_t>(info, "pre_tokens").value_or(Schema::kPreTokens)),
        next_tokens(attribute<int64_t>(info, "next_tokens").value_or(Schema::kNextTokens)),
        keep_prob(attribute<float>(info, "keep_prob").value_or(Schema::kKeepProb)) {}

  bool tnd() const { return input_layout == "TND"; }

  struct Common {
    std::optional<Io::Untyped> mask;           // bool or uint8, as the node passes it
    FaHostLengths query_lengths, key_lengths;  // as the node passes them
    FlashAttentionGeometry g;
    Shape out_shape, stats_shape;
  };

  // The inputs, checked against the contract.
  template <class Args>
  Ort::Status read(const Io& io, Args& a) const {
    Op::inputs(io, a);
    return check(a, a.query_lengths, a.key_lengths);
  }

  // The contract's rules, on the lengths in host memory.
  template <class Args>
  Ort::Status check(Args& a, const FaHostLengths& query_lengths, const FaHostLengths& key_lengths) const {
    FlashAttentionChecks checks(Op::kName, input_layout, sparse_mode, keep_prob, head_num, Schema{});
    FlashAttentionGeometry& g = a.g;
    checks.query_key_value(a.query.shape, a.key.shape, a.value.shape, g);
    if (!checks.ok()) return checks.status();
    a.out_shape = checks.out_shape(a.query.shape);
    a.stats_shape = checks.stats_shape();
    checks.mask(a.mask, sparse_mode, g);
    static_cast<const Op&>(*this).check_rest(a, checks);
    checks.lengths("actual_seq_lengths_query", query_lengths, checks.query().s, g.spans.query_end);
    checks.lengths("actual_seq_lengths_kv", key_lengths, checks.key().s, g.spans.key_end);
    checks.same_batches(g);
    g.sparse_mode = static_cast<int>(sparse_mode);
    g.pre_tokens = pre_tokens, g.next_tokens = next_tokens;
    g.scale = scale_value;
    return checks.status();
  }

  std::optional<int64_t> head_num;
  std::string input_layout;
  float scale_value;
  int64_t sparse_mode, pre_tokens, next_tokens;
  float keep_prob;
};

template <class T>
struct FlashAttentionScoreSignature
    : FlashAttentionBase<FlashAttentionScoreSignature<T>, schema::FlashAttentionScore> {
  using Base = FlashAttentionBase<FlashAttentionScoreSignature<T>, schema::FlashAttentionScore>;
  using Schema = schema::FlashAttentionScore;
  static constexpr const char* kName = Schema::kName;
  static constexpr TypeOf kTypes[] = {
      {"T", element_type<T>()}, {"M", kAnyType}, {"LQ", kAnyType}, {"LK", kAnyType}};
  static constexpr schema::InputIndex kHostInputs[] = {Schema::kInput_actual_seq_lengths_query,
                                                       Schema::kInput_actual_seq_lengths_kv};

  using Base::Base;

  struct Args : Base::Common {
    Input<T> query, key, value;
  };
  static void inputs(const Io& io, Args& a) {
    a.query = io.input<T>(Schema::kInput_query);
    a.key = io.input<T>(Schema::kInput_key);
    a.value = io.input<T>(Schema::kInput_value);
    a.mask = io.untyped_input(Schema::kInput_atten_mask);
    a.query_lengths = io.untyped_input(Schema::kInput_actual_seq_lengths_query);
    a.key_lengths = io.untyped_input(Schema::kInput_actual_seq_lengths_kv);
  }
  void check_rest(Args&, FlashAttentionChecks&) const {}
};

template <class T>
struct FlashAttentionScoreGradSignature
    : FlashAttentionBase<FlashAttentionScoreGradSignature<T>, schema::FlashAttentionScoreGrad> {
  using Base = FlashAttentionBase<FlashAttentionScoreGradSignature<T>, schema::FlashAttentionScoreGrad>;
  using Schema = schema::FlashAttentionScoreGrad;
  static constexpr const char* kName = Schema::kName;
  static constexpr TypeOf kTypes[] = {
      {"T", element_type<T>()}, {"M", kAnyType}, {"LQ", kAnyType}, {"LK", kAnyType}};
  static constexpr schema::InputIndex kHostInputs[] = {Schema::kInput_actual_seq_lengths_query,
                                                       Schema::kInput_actual_seq_lengths_kv};

  using Base::Base;

  struct Args : Base::Common {
    Input<T> query, key, value, dy, attention_in;
    Input<float> softmax_max, softmax_sum;
  };
  static void inputs(const Io& io, Args& a) {
    a.query = io.input<T>(Schema::kInput_query);
    a.key = io.input<T>(Schema::kInput_key);
    a.value = io.input<T>(Schema::kInput_value);
    a.dy = io.input<T>(Schema::kInput_dy);
    a.mask = io.untyped_input(Schema::kInput_atten_mask);
    a.softmax_max = io.input<float>(Schema::kInput_softmax_max);
    a.softmax_sum = io.input<float>(Schema::kInput_softmax_sum);
    a.attention_in = io.input<T>(Schema::kInput_attention_in);
    a.query_lengths = io.untyped_input(Schema::kInput_actual_seq_lengths_query);
    a.key_lengths = io.untyped_input(Schema::kInput_actual_seq_lengths_kv);
  }
  // dy and attention_in shaped as attention_out, the statistics as the forward's.
  void check_rest(Args& a, FlashAttentionChecks& checks) const {
    const char* stats = this->tnd() ? "[T1, N1, 8]" : "[B, N1, S1, 8]";
    checks.shaped("dy", a.dy.shape, a.out_shape, "attention_out's shape");
    checks.shaped("attention_in", a.attention_in.shape, a.out_shape, "attention_out's shape");
    checks.shaped("softmax_max", a.softmax_max.shape, a.stats_shape, stats);
    checks.shaped("softmax_sum", a.softmax_sum.shape, a.stats_shape, stats);
  }
};

// Sizes the CPU kernels' 32-bit BLAS can take: head dims and the leading dimensions of the rows
// it reads in place.
inline Ort::Status check_fa_blas_sizes(const char* op, const FlashAttentionGeometry& g) {
  for (const int64_t size : {g.d, g.dv, g.query.row, g.key.row, g.value.row, g.out.row}) {
    if (size > INT_MAX)
      return op_error(op, "sizes past 2^31 - 1 (head dims, or heads x head dims in a row) are not supported");
  }
  return Ort::Status(nullptr);
}

}  // namespace oao
