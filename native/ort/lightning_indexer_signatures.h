// What LightningIndexer and its grad look like to ONNX Runtime on every execution provider: slot
// types, attributes and the contract's shape rules (BSND query [B,S1,N1,D], key [B,S2,1,D],
// weights [B,S1,N1]; TND query [T1,N1,D], key [T2,1,D], weights [T1,N1] with cumulative
// actual_seq_lengths; per-token rows [.., K]).
#pragma once

#include <climits>
#include <optional>
#include <string>

#include "kernels/lightning_indexer_rows.h"
#include "ort/io.h"
#include "ort/schema.h"

namespace oao {

// Geometry of one call: batch spans, heads, head dim and top-k width.
struct LightningIndexerShape {
  TokenSpans spans;
  int64_t n1 = 0, d = 0, k = 0;
};

class LightningIndexerChecks {
 public:
  // Schema (schema::LightningIndexer or schema::LightningIndexerGrad) holds the choices.
  template <class Schema>
  LightningIndexerChecks(const char* op, const std::string& layout, int64_t sparse_mode, Schema)
      : op_(op), layout_(layout), error_(choice_error("layout", layout, Schema::kLayoutChoices)) {
    if (ok()) error_ = choice_error("sparse_mode", sparse_mode, Schema::kSparseModeChoices);
  }

  bool tnd() const { return layout_ == "TND"; }

  // query and key fix B (or T1, T2), N1 and D; key must have one head.
  void query_key(const Shape& query, const Shape& key, LightningIndexerShape& out) {
    const size_t rank = tnd() ? 3 : 4;
    if (!ok()) return;
    if (query.size() != rank || key.size() != rank) {
      fail("layout " + layout_ + " needs 'query' and 'key' of rank " + std::to_string(rank) + ", got " +
           shape_str(query) + " and " + shape_str(key));
    } else if (key[rank - 2] != 1) {
      fail("input 'key' " + shape_str(key) + " must have one head (N2 = 1)");
    } else if (key[rank - 1] != query[rank - 1]) {
      fail("inputs 'query' " + shape_str(query) + " and 'key' " + shape_str(key) +
           " must share the head dim D");
    } else if (!tnd() && key[0] != query[0]) {
      fail("inputs 'query' " + shape_str(query) + " and 'key' " + shape_str(key) + " must share the batch B");
    } else if (query[rank - 2] < 1 || query[rank - 1] < 1) {
      // Without heads or head dims every score is 0, and nothing in memory would bound the loops
      // over tokens and keys that empty tensors can still claim.
      fail("input 'query' " + shape_str(query) + " must have N1 >= 1 heads of D >= 1");
    }
    if (!ok()) return;
    out.n1 = query[rank - 2];
    out.d = query[rank - 1];
    // BSND batches that hold neither tokens nor key rows are left out: an empty tensor may claim
    // any number of them.
    if (!tnd() && (query[1] > 0 || key[1] > 0)) {
      for (int64_t b = 1; b <= query[0]; ++b) {
        out.spans.query_end.push_back(b * query[1]);
        out.spans.key_end.push_back(b * key[1]);
      }
    }
  }

  // A per-token input of shape query.shape[:-2] + [width].
  void per_token(const char* name, const Shape& shape, const Shape& query, int64_t width) {
    if (!ok()) return;
    Shape want(query.begin(), query.end() - 2);
    want.push_back(width);
    if (shape != want)
      fail(std::string("input '") + name + "' has shape " + shape_str(shape) + "; it must be " +
           shape_str(want));
  }

  // TND's cumulative lengths (B values, no leading zero, ending at the token / key row count);
  // BSND takes none, as aclnn wants null pointers there.
  void lengths(const char* name, const std::optional<Io::Untyped>& input, int64_t total,
               std::vector<int64_t>& ends) {
    if (!ok()) return;
    if (!tnd()) {
      if (input) fail(std::string("layout BSND takes no input '") + name + "'");
      return;
    }
    if (!input) return fail(std::string("layout TND needs input '") + name + "'");
    if (input->type != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 &&
        input->type != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) {
      return fail(std::string("input '") + name + "' must be int64 or int32");
    }
    const int64_t count = element_count(input->shape);
    if (input->shape.size() != 1 || count < 1)
      return fail(std::string("input '") + name + "' must be 1-D with one value per batch");
    ends.resize(count);
    for (int64_t b = 0; b < count; ++b) {
      ends[b] = input->type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64
                    ? static_cast<const int64_t*>(input->data)[b]
                    : static_cast<const int32_t*>(input->data)[b];
      if (ends[b] < (b == 0 ? 0 : ends[b - 1])) {
        return fail(std::string("input '") + name +
                    "' must be cumulative ends: non-negative and non-decreasing");
      }
    }
    if (ends.back() != total) {
      fail(std::string("input '") + name + "' ends at " + std::to_string(ends.back()) +
           " but the tensor has " + std::to_string(total) + " rows");
    }
  }

  void same_batches(const LightningIndexerShape& s) {
    if (ok() && s.spans.query_end.size() != s.spans.key_end.size()) {
      fail(
          "inputs 'actual_seq_lengths_query' and 'actual_seq_lengths_key' must have one value per batch "
          "each");
    }
  }

  void head_num(std::optional<int64_t> head_num, int64_t n1) {
    if (!ok()) return;
    if (!head_num) return fail("attribute 'head_num' is required");
    if (*head_num < 1)
      return fail("attribute 'head_num' is " + std::to_string(*head_num) + "; it must be >= 1");
    if (*head_num != n1)
      fail("attribute 'head_num' is " + std::to_string(*head_num) +
           " but query has N1 = " + std::to_string(n1) + " heads");
  }

  bool ok() const { return error_.empty(); }
  Ort::Status status() const { return ok() ? Ort::Status(nullptr) : op_error(op_, error_); }

 private:
  void fail(const std::string& message) {
    if (ok()) error_ = message;
  }

  const char* op_;
  std::string layout_;
  std::string error_;
};

// Sizes the CPU kernels' 32-bit BLAS can take.
inline Ort::Status check_blas_sizes(const char* op, const LightningIndexerShape& s) {
  if (s.n1 > INT_MAX || s.d > INT_MAX || s.k > INT_MAX || s.spans.key_rows() > INT_MAX)
    return op_error(op, "sizes past 2^31 - 1 (heads, head dim, top-k or key rows) are not supported");
  return Ort::Status(nullptr);
}

// Lengths as the checks read them: host memory (the CPU's inputs, or copies of device ones).
using HostLengths = std::optional<Io::Untyped>;

// What both ops share: the layout and sparse_mode attributes (Schema: their defaults and choices), the
// lengths and geometry in their Args, read, and the rules on query, key and the lengths around
// Op::check_rest, the op's own.
template <class Op, class Schema>
struct LightningIndexerBase : Signature {
  explicit LightningIndexerBase(const OrtKernelInfo* info)
      : layout(attribute<std::string>(info, "layout").value_or(Schema::kLayout)),
        sparse_mode(attribute<int64_t>(info, "sparse_mode").value_or(Schema::kSparseMode)) {}

  bool tnd() const { return layout == "TND"; }

  struct Lengths {
    HostLengths query_lengths, key_lengths;  // as the node passes them (device memory under aclnn)
    LightningIndexerShape s;
  };

  // The inputs, checked against the contract (on the CPU the lengths are in host memory already).
  template <class Args>
  Ort::Status read(const Io& io, Args& a) const {
    Op::inputs(io, a);
    return check(a, a.query_lengths, a.key_lengths);
  }

  // The contract's rules, on the lengths in host memory.
  template <class Args>
  Ort::Status check(Args& a, const HostLengths& query_lengths, const HostLengths& key_lengths) const {
    LightningIndexerChecks checks(Op::kName, layout, sparse_mode, Schema{});
    checks.query_key(a.query.shape, a.key.shape, a.s);
    if (!checks.ok()) return checks.status();
    if (auto status = static_cast<const Op&>(*this).check_rest(a, checks); !status.IsOK()) return status;
    checks.lengths("actual_seq_lengths_query", query_lengths, a.query.shape[0], a.s.spans.query_end);
    checks.lengths("actual_seq_lengths_key", key_lengths, a.key.shape[0], a.s.spans.key_end);
    checks.same_batches(a.s);
    return checks.status();
  }

  std::string layout;
  int64_t sparse_mode;
};

template <class T>
struct LightningIndexerSignature
    : LightningIndexerBase<LightningIndexerSignature<T>, schema::LightningIndexer> {
  using Base = LightningIndexerBase<LightningIndexerSignature<T>, schema::LightningIndexer>;
  using Schema = schema::LightningIndexer;
  static constexpr const char* kName = Schema::kName;
  static constexpr ONNXTensorElementDataType kT = element_type<T>();
  static constexpr TypeOf kTypes[] = {{"T", kT}, {"LQ", kAnyType}, {"LK", kAnyType}};

  explicit LightningIndexerSignature(const OrtKernelInfo* info)
      : Base(info), sparse_count(attribute<int64_t>(info, "sparse_count").value_or(Schema::kSparseCount)) {}

  struct Args : Base::Lengths {
    Input<T> query, key, weights;
  };
  static void inputs(const Io& io, Args& a) {
    a.query = io.input<T>(Schema::kInput_query);
    a.key = io.input<T>(Schema::kInput_key);
    a.weights = io.input<T>(Schema::kInput_weights);
    a.query_lengths = io.untyped_input(Schema::kInput_actual_seq_lengths_query);
    a.key_lengths = io.untyped_input(Schema::kInput_actual_seq_lengths_key);
  }
  // K and the weights' shape; a failure goes to `checks` unless it is the first.
  Ort::Status check_rest(Args& a, LightningIndexerChecks& checks) const {
    if (sparse_count < 1) {
      return op_error(kName,
                      "attribute 'sparse_count' is " + std::to_string(sparse_count) + "; it must be >= 1");
    }
    a.s.k = sparse_count;
    checks.per_token("weights", a.weights.shape, a.query.shape, a.s.n1);
    return Ort::Status(nullptr);
  }

  // sparse_indices and sparse_values: query's leading axes and K.
  Shape output_shape(const Shape& query) const {
    Shape shape(query.begin(), query.end() - 2);
    shape.push_back(sparse_count);
    return shape;
  }

  int64_t sparse_count;
};

template <class T>
struct LightningIndexerGradSignature
    : LightningIndexerBase<LightningIndexerGradSignature<T>, schema::LightningIndexerGrad> {
  using Base = LightningIndexerBase<LightningIndexerGradSignature<T>, schema::LightningIndexerGrad>;
  using Schema = schema::LightningIndexerGrad;
  static constexpr const char* kName = Schema::kName;
  static constexpr ONNXTensorElementDataType kT = element_type<T>();
  static constexpr TypeOf kTypes[] = {{"T", kT}, {"I", kAnyType}, {"LQ", kAnyType}, {"LK", kAnyType}};

  // pre_tokens, next_tokens and deterministic change nothing in the math (aclnn reads and ignores
  // the first two); the aclnn backend passes them on.
  explicit LightningIndexerGradSignature(const OrtKernelInfo* info)
      : Base(info),
        head_num(attribute<int64_t>(info, "head_num")),
        pre_tokens(attribute<int64_t>(info, "pre_tokens").value_or(Schema::kPreTokens)),
        next_tokens(attribute<int64_t>(info, "next_tokens").value_or(Schema::kNextTokens)),
        deterministic(attribute<int64_t>(info, "deterministic").value_or(Schema::kDeterministic) != 0) {}

  struct Args : Base::Lengths {
    Input<T> query, key, dy, weights;
    Io::Untyped indices;  // int32 or int64: their values are checked by run, which knows the type
  };
  static void inputs(const Io& io, Args& a) {
    a.query = io.input<T>(Schema::kInput_query);
    a.key = io.input<T>(Schema::kInput_key);
    a.dy = io.input<T>(Schema::kInput_dy);
    a.indices = io.untyped_input(Schema::kInput_sparse_indices);
    a.weights = io.input<T>(Schema::kInput_weights);
    a.query_lengths = io.untyped_input(Schema::kInput_actual_seq_lengths_query);
    a.key_lengths = io.untyped_input(Schema::kInput_actual_seq_lengths_key);
  }
  // K, head_num and the per-token inputs' shapes; failures go to `checks`.
  Ort::Status check_rest(Args& a, LightningIndexerChecks& checks) const {
    LightningIndexerShape& s = a.s;
    s.k = a.dy.shape.empty() ? 0 : a.dy.shape.back();
    checks.head_num(head_num, s.n1);
    checks.per_token("weights", a.weights.shape, a.query.shape, s.n1);
    checks.per_token("dy", a.dy.shape, a.query.shape, s.k);
    checks.per_token("sparse_indices", a.indices.shape, a.query.shape, s.k);
    return Ort::Status(nullptr);
  }

  // The contract's index rule: a counted slot holds -1 or a key row of its batch.
  template <class I>
  Ort::Status check_indices(const I* indices, const LightningIndexerShape& s) const {
    const BadIndex bad = find_bad_index(indices, s.spans, s.k, static_cast<int>(this->sparse_mode));
    if (bad.token < 0) return Ort::Status(nullptr);
    return op_error(kName, "sparse_indices of token " + std::to_string(bad.token) + ", slot " +
                               std::to_string(bad.slot) + " is " + std::to_string(bad.index) +
                               "; it must be -1 or inside [0, " + std::to_string(bad.key_rows) +
                               "), the key rows of its batch");
  }

  std::optional<int64_t> head_num;
  int64_t pre_tokens, next_tokens;
  bool deterministic;
};

}  // namespace oao
