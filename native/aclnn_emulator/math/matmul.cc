// libopapi_math.so: the matmul family's functions (native/aclnn/standard/matmul.cc calls them):
// aclnnMatmul, and aclnnAddmm (ops-nn matmul/addmm docs: self broadcastable to [m, n], mat1 [m, k]
// and mat2 [k, n] of one float type, which self and out share; beta * self + alpha * product
// rounded once to out's type), with the same cube modes.
// aclnnMatmul checks what its page lists for Atlas A2/A3 (ops-nn matmul/mat_mul_v3/docs/
// aclnnMatmul.md): 1 to 6 axes per input, numpy's promotion of 1-D operands, broadcast batch
// axes, equal K, the dtype pairs the A2 deduces, the cubeMathType values it accepts per dtype;
// 161002 for each. It multiplies the inputs as the chosen cube mode reads them and sums in double
// (the device accumulates in float32, far closer to exact than the one rounding to out's type).
#include <cmath>
#include <type_traits>

#include "aclnn/standard/matmul_abi.h"
#include "elements.h"
#include "math/common.h"

namespace {

using namespace aclemu;
using namespace aclemu::math;

constexpr size_t kMaxRank = 6;

// The cube units' modes (the page's cubeMathType values).
enum CubeMath : int8_t {
  kKeepDtype = 0,
  kAllowDownPrecision = 1,
  kUseFp16 = 2,
  kUseHf32 = 3,
  kUseFp32Add = 4
};

// float32 as HFLOAT32 holds it: 11 significant bits, rounded to nearest even.
float to_hf32(float v) {
  const uint32_t u = float_bits(v);
  if ((u & 0x7F800000u) == 0x7F800000u) return v;  // inf, NaN
  const uint32_t sign = u & 0x80000000u;
  return bits_float(sign | (round_shift(u & 0x7FFFFFFFu, 13) << 13));
}

std::vector<int64_t> batch_of(const std::vector<int64_t>& dims) {
  return dims.size() <= 2 ? std::vector<int64_t>{} : std::vector<int64_t>(dims.begin(), dims.end() - 2);
}

std::string names(const aclTensor& self, const aclTensor& mat2) {
  return "self " + shape_text(self.dims) + " and mat2 " + shape_text(mat2.dims);
}

Plan matmul(const aclTensor* self_p, const aclTensor* mat2_p, const aclTensor* out_p, int8_t cube) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& mat2 = need(mat2_p, "mat2");
  const aclTensor& out = need(out_p, "out");
  check_dtype(self, "self", kFloatTypes);
  check_dtype(mat2, "mat2", kFloatTypes);
  check_dtype(out, "out", kFloatTypes);
  aclDataType promoted = self.dtype;
  if (self.dtype != mat2.dtype) {
    if (self.dtype == ACL_BF16 || mat2.dtype == ACL_BF16) {
      fail(kErrParamInvalid, "self dtype " + dtype_name(self.dtype) + " and mat2 dtype " +
                                 dtype_name(mat2.dtype) +
                                 " do not deduce on A2/A3 (BFLOAT16 pairs only with itself)");
    }
    promoted = ACL_FLOAT;
  }
  if (out.dtype != promoted && !(promoted == ACL_FLOAT16 && out.dtype == ACL_FLOAT)) {
    fail(kErrParamInvalid, "out dtype " + dtype_name(out.dtype) + " is not the deduced " +
                               dtype_name(promoted) + " (or FLOAT for FLOAT16 inputs)");
  }
  if (cube < kKeepDtype || cube > kUseFp32Add) {
    fail(kErrParamInvalid, "cubeMathType " + std::to_string(cube) + " is not one of 0 to 4");
  }
  if (cube == kUseFp16 && promoted == ACL_BF16)
    fail(kErrParamInvalid, "cubeMathType 2 (USE_FP16) takes no BFLOAT16");
  if (cube == kUseHf32 && promoted != ACL_FLOAT) {
    fail(kErrParamInvalid, "cubeMathType 3 (USE_HF32) takes FLOAT only, not " + dtype_name(promoted));
  }
  for (const auto& [t, name] : {std::pair<const aclTensor*, const char*>{&self, "self"}, {&mat2, "mat2"}}) {
    if (t->dims.empty() || t->dims.size() > kMaxRank) {
      fail(kErrParamInvalid,
           std::string(name) + " has " + std::to_string(t->dims.size()) + " axes, not 1 to 6");
    }
  }
  const size_t ra = self.dims.size(), rb = mat2.dims.size();
  const int64_t k = self.dims.back();
  if (k != (rb == 1 ? mat2.dims[0] : mat2.dims[rb - 2])) {
    fail(kErrParamInvalid, "the K axes of " + names(self, mat2) + " differ");
  }
  aclTensor batch_a = self, batch_b = mat2;
  batch_a.dims = batch_of(self.dims);
  batch_b.dims = batch_of(mat2.dims);
  std::vector<int64_t> shape = broadcast_shape(batch_a, "self's batch", batch_b, "mat2's batch");
  const int64_t m = ra > 1 ? self.dims[ra - 2] : 1, n = rb > 1 ? mat2.dims.back() : 1;
  const std::vector<int64_t> batch = shape;
  if (ra > 1) shape.push_back(m);
  if (rb > 1) shape.push_back(n);
  if (out.dims != shape) {
    fail(kErrParamInvalid, "out shape " + shape_text(out.dims) + " is not " + shape_text(shape) + " (" +
                               names(self, mat2) + ")");
  }
  const bool fp32 = promoted == ACL_FLOAT;
  const auto as_read = [cube, fp32](float v) -> double {
    if (fp32 && (cube == kAllowDownPrecision || cube == kUseHf32)) return to_hf32(v);
    if (fp32 && cube == kUseFp16) return f16_to_float(float_to_f16(v));
    return v;
  };
  auto compute = [self_p, mat2_p, out_p, batch, m, n, k, as_read] {
    const std::vector<float> a = read_floats(*self_p), b = read_floats(*mat2_p);
    const std::vector<int64_t> ia = broadcast_index(batch, batch_of(self_p->dims)),
                               ib = broadcast_index(batch, batch_of(mat2_p->dims));
    std::vector<double> y(ia.size() * m * n);
    for (size_t t = 0; t < ia.size(); ++t) {
      const float* pa = a.data() + ia[t] * m * k;
      const float* pb = b.data() + ib[t] * k * n;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;  // K = 0: the vendor fills the output with zeros
          for (int64_t p = 0; p < k; ++p) sum += as_read(pa[i * k + p]) * as_read(pb[p * n + j]);
          y[(t * m + i) * n + j] = sum;
        }
      }
    }
    write(*out_p, y);
  };
  return {{self_p, mat2_p}, {out_p}, compute};
}

Plan addmm(const aclTensor* self_p, const aclTensor* mat1_p, const aclTensor* mat2_p, const aclScalar* beta_p,
           const aclScalar* alpha_p, const aclTensor* out_p, int8_t cube) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& mat1 = need(mat1_p, "mat1");
  const aclTensor& mat2 = need(mat2_p, "mat2");
  const double beta = need_scalar(beta_p, "beta").value;
  const double alpha = need_scalar(alpha_p, "alpha").value;
  const aclTensor& out = need(out_p, "out");
  check_dtype(mat1, "mat1", kFloatTypes);
  check_same_dtype(mat2, "mat2", mat1, "mat1");
  check_same_dtype(self, "self", mat1, "mat1");
  check_same_dtype(out, "out", mat1, "mat1");
  if (cube < kKeepDtype || cube > kUseFp32Add) {
    fail(kErrParamInvalid, "cubeMathType " + std::to_string(cube) + " is not one of 0 to 4");
  }
  if (cube == kUseFp16 && mat1.dtype == ACL_BF16)
    fail(kErrParamInvalid, "cubeMathType 2 (USE_FP16) takes no BFLOAT16");
  if (cube == kUseHf32 && mat1.dtype != ACL_FLOAT) {
    fail(kErrParamInvalid, "cubeMathType 3 (USE_HF32) takes FLOAT only, not " + dtype_name(mat1.dtype));
  }
  if (mat1.dims.size() != 2 || mat2.dims.size() != 2) {
    fail(kErrParamInvalid,
         "mat1 " + shape_text(mat1.dims) + " and mat2 " + shape_text(mat2.dims) + " must both have 2 axes");
  }
  if (self.dims.size() > 2) fail(kErrParamInvalid, "self " + shape_text(self.dims) + " has more than 2 axes");
  const int64_t m = mat1.dims[0], k = mat1.dims[1], n = mat2.dims[1];
  if (mat2.dims[0] != k) {
    fail(kErrParamInvalid,
         "the K axes of mat1 " + shape_text(mat1.dims) + " and mat2 " + shape_text(mat2.dims) + " differ");
  }
  const std::vector<int64_t> shape = {m, n};
  aclTensor product = out;
  product.dims = shape;
  if (broadcast_shape(self, "self", product, "mat1 @ mat2") != shape) {
    fail(kErrParamInvalid, "self " + shape_text(self.dims) + " does not broadcast to " + shape_text(shape));
  }
  if (out.dims != shape)
    fail(kErrParamInvalid, "out shape " + shape_text(out.dims) + " is not " + shape_text(shape));
  const bool fp32 = mat1.dtype == ACL_FLOAT;
  const auto as_read = [cube, fp32](float v) -> double {
    if (fp32 && (cube == kAllowDownPrecision || cube == kUseHf32)) return to_hf32(v);
    if (fp32 && cube == kUseFp16) return f16_to_float(float_to_f16(v));
    return v;
  };
  auto compute = [self_p, mat1_p, mat2_p, out_p, shape, m, n, k, beta, alpha, as_read] {
    const std::vector<float> a = read_floats(*mat1_p), b = read_floats(*mat2_p), c = read_floats(*self_p);
    const std::vector<int64_t> ic = broadcast_index(shape, self_p->dims);
    std::vector<double> y(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += as_read(a[i * k + p]) * as_read(b[p * n + j]);
        const size_t at = static_cast<size_t>(i * n + j);
        // beta 0 leaves self out, NaN there included (torch's addmm rule; the page does not say).
        y[at] = alpha * sum + (beta == 0 ? 0.0 : beta * c[ic[at]]);
      }
    }
    write(*out_p, y);
  };
  return {{self_p, mat1_p, mat2_p}, {out_p}, compute};
}

}  // namespace

ACLEMU_TWO_PHASES(aclnnMatmul,
                  (const aclTensor* self, const aclTensor* mat2, const aclTensor* out, int8_t cubeMathType,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  matmul(self, mat2, out, cubeMathType))
static_assert(std::is_same_v<decltype(&aclnnMatmulGetWorkspaceSize), oao::acl::MatmulPrepare>);

ACLEMU_TWO_PHASES(aclnnAddmm,
                  (const aclTensor* self, const aclTensor* mat1, const aclTensor* mat2, const aclScalar* beta,
                   const aclScalar* alpha, const aclTensor* out, int8_t cubeMathType, uint64_t* workspaceSize,
                   aclOpExecutor** executor),
                  addmm(self, mat1, mat2, beta, alpha, out, cubeMathType))
static_assert(std::is_same_v<decltype(&aclnnAddmmGetWorkspaceSize), oao::acl::AddmmPrepare>);
