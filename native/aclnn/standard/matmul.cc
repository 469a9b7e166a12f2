// MatMul: numpy's matmul is aclnnMatmul's, so the node's own tensors go to one call. The product
// stays in the inputs' type (KEEP_DTYPE: no HF32 for float32) with float32 accumulation, as the
// vendor's cube units do. The page allows 1 to 6 axes per input; beyond that, batch axes that
// broadcast alike are merged into one (a row-major reshape, no copy) to bring both within it.
// Gemm: alpha * A' @ B' + beta * C is aclnnAddmm's formula; transA and transB are strided views of
// A and B (no copy), C a 2-D view of itself. Without C, aclnnMatmul, then aclnnMuls for alpha != 1.
#include "aclnn/standard/matmul_abi.h"
#include "aclnn/standard/rows.h"

namespace oao::standard {
namespace {

constexpr size_t kMaxMatmulRank = 6;  // aclnnMatmul's page: self and mat2 have 1 to 6 axes

// The batch axes of a matmul operand (all but its matrix axes; none for a 1-D operand).
Shape batch_of(const Shape& shape) {
  return shape.size() <= 2 ? Shape{} : Shape(shape.begin(), shape.end() - 2);
}

// `batch` left-padded with 1s to `rank` axes.
Shape padded(const Shape& batch, size_t rank) {
  Shape out(rank - batch.size(), 1);
  out.insert(out.end(), batch.begin(), batch.end());
  return out;
}

// The operands' shapes with their batch axes merged where both broadcast alike: axes of size 1
// in the output drop out, and neighbours where each operand is either whole or broadcast in both
// merge into their product. `out` gets the output's merged shape.
struct Merged {
  Shape a, b, out;
};

Merged merge_batches(const Shape& a, const Shape& b, const Shape& batch) {
  const Shape pa = padded(batch_of(a), batch.size()), pb = padded(batch_of(b), batch.size());
  Shape ma, mb, mo;
  for (size_t k = 0; k < batch.size(); ++k) {
    if (batch[k] == 1) continue;
    const bool a_whole = pa[k] != 1, b_whole = pb[k] != 1;
    if (!mo.empty() && (ma.back() != 1) == a_whole && (mb.back() != 1) == b_whole) {
      ma.back() *= pa[k];
      mb.back() *= pb[k];
      mo.back() *= batch[k];
    } else {
      ma.push_back(pa[k]);
      mb.push_back(pb[k]);
      mo.push_back(batch[k]);
    }
  }
  Merged m{ma, mb, mo};
  // A 1-D operand stays 1-D (aclnnMatmul promotes it as numpy does); others keep their matrix axes.
  m.a = a.size() == 1 ? a : ma;
  if (a.size() > 1) m.a.insert(m.a.end(), a.end() - 2, a.end());
  m.b = b.size() == 1 ? b : mb;
  if (b.size() > 1) m.b.insert(m.b.end(), b.end() - 2, b.end());
  if (a.size() > 1) m.out.push_back(a[a.size() - 2]);
  if (b.size() > 1) m.out.push_back(b.back());
  return m;
}

Ort::Status matmul(Call& call) {
  const Tensor a = call.input(0), b = call.input(1);
  if (a.shape.empty() || b.shape.empty()) {
    return call.error("inputs A " + shape_str(a.shape) + " and B " + shape_str(b.shape) +
                      " must each have at least one axis");
  }
  const int64_t k_a = a.shape.back();
  const int64_t k_b = b.shape.size() == 1 ? b.shape[0] : b.shape[b.shape.size() - 2];
  if (k_a != k_b) {
    return call.error("input A " + shape_str(a.shape) + " has K = " + std::to_string(k_a) + " but B " +
                      shape_str(b.shape) + " has K = " + std::to_string(k_b));
  }
  const auto batch = broadcast(batch_of(a.shape), batch_of(b.shape));
  if (!batch) {
    return call.error("the batch axes of A " + shape_str(a.shape) + " and B " + shape_str(b.shape) +
                      " do not broadcast");
  }
  Shape shape = *batch;
  if (a.shape.size() > 1) shape.push_back(a.shape[a.shape.size() - 2]);
  if (b.shape.size() > 1) shape.push_back(b.shape.back());
  void* y = call.output(0, shape);
  // K = 0 with a non-empty output is aclnnMatmul's to fill with zeros.
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  const ONNXTensorElementDataType type = call.output_type(0);
  Merged views{a.shape, b.shape, shape};
  if (a.shape.size() > kMaxMatmulRank || b.shape.size() > kMaxMatmulRank) {
    views = merge_batches(a.shape, b.shape, *batch);
    if (views.a.size() > kMaxMatmulRank || views.b.size() > kMaxMatmulRank) {
      return call.error("A " + shape_str(a.shape) + " and B " + shape_str(b.shape) +
                        " have batch axes that do not merge into the 4 aclnnMatmul takes");
    }
  }
  return call.aclnn().run<acl::MatmulPrepare>("aclnnMatmul", call.tensor(a.data, views.a, a.type),
                                              call.tensor(b.data, views.b, b.type),
                                              call.tensor(y, views.out, type), acl::kKeepDtype);
}

// A 2-D Gemm operand as the product reads it: [rows, cols] of `t`, or of its transpose (a strided
// view of the same memory).
const aclTensor* operand(Call& call, const Tensor& t, bool transposed) {
  if (!transposed) return call.tensor(t);
  return call.aclnn().view(t.data, {t.shape[1], t.shape[0]}, {1, t.shape[1]}, 0, t.shape,
                           acl_type_of(t.type));
}

Ort::Status gemm(Call& call) {
  const Tensor a = call.input(0), b = call.input(1);
  if (a.shape.size() != 2 || b.shape.size() != 2) {
    return call.error("inputs A " + shape_str(a.shape) + " and B " + shape_str(b.shape) + " must be 2-D");
  }
  const bool trans_a = call.attribute_int("transA", 0) != 0, trans_b = call.attribute_int("transB", 0) != 0;
  const float alpha = call.attribute_float("alpha").value_or(1.0f);
  const float beta = call.attribute_float("beta").value_or(1.0f);
  const int64_t m = a.shape[trans_a ? 1 : 0], k = a.shape[trans_a ? 0 : 1];
  const int64_t k_b = b.shape[trans_b ? 1 : 0], n = b.shape[trans_b ? 0 : 1];
  if (k != k_b) {
    return call.error("input A " + shape_str(a.shape) + (trans_a ? " (transposed)" : "") +
                      " has K = " + std::to_string(k) + " but B " + shape_str(b.shape) +
                      (trans_b ? " (transposed)" : "") + " has K = " + std::to_string(k_b));
  }
  const Shape shape = {m, n};
  const bool with_c = call.has_input(2);
  Shape c_view;
  if (with_c) {
    // C broadcasts to [M, N] one way: [], [N], [1, N], [M, 1], [M, N] (and 1s for either); as 2-D.
    const Shape c = call.input(2).shape;
    c_view = c.size() == 0 ? Shape{1, 1} : c.size() == 1 ? Shape{1, c[0]} : c;
    const auto full = broadcast(c_view, shape);
    if (c.size() > 2 || !full || *full != shape) {
      return call.error("input C " + shape_str(c) + " does not broadcast to [M, N] " + shape_str(shape));
    }
  }
  void* y = call.output(0, shape);
  if (m == 0 || n == 0) return Ort::Status(nullptr);
  const ONNXTensorElementDataType type = call.output_type(0);
  AclnnCall& aclnn = call.aclnn();
  const aclTensor* out = call.tensor(y, shape, type);
  // K = 0 is each function's to fill: the product is zeros.
  if (with_c) {
    const Tensor c = call.input(2);
    return aclnn.run<acl::AddmmPrepare>("aclnnAddmm", call.tensor(c.data, c_view, c.type),
                                        operand(call, a, trans_a), operand(call, b, trans_b),
                                        aclnn.scalar(beta, ACL_FLOAT), aclnn.scalar(alpha, ACL_FLOAT), out,
                                        acl::kKeepDtype);
  }
  Ort::Status status = aclnn.run<acl::MatmulPrepare>("aclnnMatmul", operand(call, a, trans_a),
                                                     operand(call, b, trans_b), out, acl::kKeepDtype);
  if (!status.IsOK() || alpha == 1.0f) return status;
  return aclnn.run<acl::MulsPrepare>("aclnnMuls", call.tensor(y, shape, type), aclnn.scalar(alpha, ACL_FLOAT),
                                     call.tensor(y, shape, type));
}

}  // namespace

std::vector<Row> matmul_rows() {
  return {
      {"MatMul", "aclnnMatmul", matmul, 2, 1, typed(kFloats, 3)},
      Row{"Gemm", "aclnnAddmm, aclnnMatmul, aclnnMuls", gemm, 3, 1, typed(kFloats, 4)}.optional_from(2),
  };
}

}  // namespace oao::standard
