// libopapi_nn.so: aclnnRmsNorm and aclnnRmsNormGrad. Rows are the leading n = rank(x) - rank(gamma)
// axes of x, columns the axes gamma covers.
#include <cmath>
#include <type_traits>
#include <utility>

#include "op.h"
#include "tensor.h"

namespace {

using namespace aclemu;

struct Rows {
  int64_t rows;
  int64_t cols;
};

// The (x, gamma) dtype pairs of the vendor's tables; Atlas inference parts take only equal pairs
// without BFLOAT16.
void check_pair(const aclTensor& x, const aclTensor& gamma) {
  check_dtype(x, "x", {ACL_FLOAT, ACL_FLOAT16, ACL_BF16});
  check_dtype(gamma, "gamma", {ACL_FLOAT, ACL_FLOAT16, ACL_BF16});
  const bool inference = product() == Product::k310P;
  if (inference && (x.dtype == ACL_BF16 || gamma.dtype == ACL_BF16)) {
    fail(kErrParamInvalid, "BFLOAT16 is not supported on Atlas inference products (SoC " + soc_name() + ")");
  }
  const bool allowed = x.dtype == gamma.dtype || (!inference && gamma.dtype == ACL_FLOAT);
  if (!allowed) {
    fail(kErrParamInvalid,
         "dtype pair x " + dtype_name(x.dtype) + " with gamma " + dtype_name(gamma.dtype) + " not supported");
  }
}

void check_product() {
  if (product() == Product::kOther) fail_product();
}

// gamma covers the trailing axes of x; rstd holds one value per row, whatever its shape.
Rows check_rows(const aclTensor& x, const aclTensor& gamma, const aclTensor& rstd) {
  check_rank(x, "x", 1, 8);
  check_rank(gamma, "gamma", 1, 8);
  check_rank(rstd, "rstd", 1, 8);
  if (gamma.dims.size() > x.dims.size()) fail(kErrTiling, "gamma has more axes than x");
  const size_t n = x.dims.size() - gamma.dims.size();
  check_shape(gamma, "gamma", {x.dims.begin() + n, x.dims.end()}, "the trailing axes of x");
  const Rows shape{numel({x.dims.begin(), x.dims.begin() + n}), numel(gamma)};
  if (numel(rstd) != shape.rows) {
    fail(kErrTiling, "rstd has " + std::to_string(numel(rstd)) + " elements, x has " +
                         std::to_string(shape.rows) + " rows");
  }
  return shape;
}

Plan rms_norm_grad(const aclTensor* dy_p, const aclTensor* x_p, const aclTensor* rstd_p,
                   const aclTensor* gamma_p, const aclTensor* dx_p, const aclTensor* dgamma_p) {
  const aclTensor& dy = need(dy_p, "dy");
  const aclTensor& x = need(x_p, "x");
  const aclTensor& rstd = need(rstd_p, "rstd");
  const aclTensor& gamma = need(gamma_p, "gamma");
  const aclTensor& dx = need(dx_p, "dxOut");
  const aclTensor& dgamma = need(dgamma_p, "dgammaOut");
  check_pair(x, gamma);
  check_same_dtype(dy, "dy", x, "x");
  check_same_dtype(dx, "dxOut", x, "x");
  check_dtype(rstd, "rstd", {ACL_FLOAT});
  check_dtype(dgamma, "dgammaOut", {ACL_FLOAT});
  check_product();
  const Rows shape = check_rows(x, gamma, rstd);
  check_shape(dy, "dy", x.dims, "x's shape");
  check_shape(dx, "dxOut", x.dims, "x's shape");
  check_shape(dgamma, "dgammaOut", gamma.dims, "gamma's shape");
  if (product() == Product::k310P && x.dims.back() * static_cast<int64_t>(element_size(x.dtype)) < 32) {
    fail(kErrTiling, "the last axis of x must hold at least 32 bytes on Atlas inference products");
  }
  auto compute = [dy_p, x_p, rstd_p, gamma_p, dx_p, dgamma_p, shape] {
    const std::vector<float> dy = read_floats(*dy_p), x = read_floats(*x_p), rstd = read_floats(*rstd_p),
                             gamma = read_floats(*gamma_p);
    std::vector<float> dx(x.size()), dgamma(static_cast<size_t>(shape.cols), 0.0f);
    for (int64_t r = 0; r < shape.rows; ++r) {
      const float rs = rstd[r];
      const int64_t base = r * shape.cols;
      float sum = 0.0f;
      for (int64_t c = 0; c < shape.cols; ++c) sum += dy[base + c] * gamma[c] * (x[base + c] * rs);
      const float mean = sum / static_cast<float>(shape.cols);
      for (int64_t c = 0; c < shape.cols; ++c) {
        const float xhat = x[base + c] * rs;
        dx[base + c] = rs * (dy[base + c] * gamma[c] - xhat * mean);
        dgamma[c] += dy[base + c] * xhat;
      }
    }
    write_floats(*dx_p, dx);
    write_floats(*dgamma_p, dgamma);
  };
  return Plan{{dy_p, x_p, rstd_p, gamma_p}, {dx_p, dgamma_p}, compute};
}

Plan rms_norm(const aclTensor* x_p, const aclTensor* gamma_p, double epsilon, const aclTensor* y_p,
              const aclTensor* rstd_p) {
  const aclTensor& x = need(x_p, "x");
  const aclTensor& gamma = need(gamma_p, "gamma");
  const aclTensor& y = need(y_p, "yOut");
  const aclTensor& rstd = need(rstd_p, "rstdOut");
  check_pair(x, gamma);
  check_same_dtype(y, "yOut", x, "x");
  check_dtype(rstd, "rstdOut", {ACL_FLOAT});
  check_product();
  const Rows shape = check_rows(x, gamma, rstd);
  check_shape(y, "yOut", x.dims, "x's shape");
  if (shape.cols == 0) fail(kErrTiling, "gamma must not be empty");
  if (!(epsilon >= 0.0)) fail(kErrTiling, "epsilon must not be negative");
  if (product() == Product::k310P && shape.cols * static_cast<int64_t>(element_size(x.dtype)) < 32) {
    fail(kErrTiling, "the normalized axes of x must hold at least 32 bytes on Atlas inference products");
  }
  const float eps = static_cast<float>(epsilon);
  auto compute = [x_p, gamma_p, y_p, rstd_p, shape, eps] {
    const std::vector<float> x = read_floats(*x_p), gamma = read_floats(*gamma_p);
    std::vector<float> y(x.size()), rstd(static_cast<size_t>(shape.rows));
    for (int64_t r = 0; r < shape.rows; ++r) {
      const int64_t base = r * shape.cols;
      float sum = 0.0f;
      for (int64_t c = 0; c < shape.cols; ++c) sum += x[base + c] * x[base + c];
      const float rs = 1.0f / std::sqrt(sum / static_cast<float>(shape.cols) + eps);
      rstd[r] = rs;
      for (int64_t c = 0; c < shape.cols; ++c) y[base + c] = x[base + c] * rs * gamma[c];
    }
    write_floats(*y_p, y);
    write_floats(*rstd_p, rstd);
  };
  return Plan{{x_p, gamma_p}, {y_p, rstd_p}, compute};
}

}  // namespace

ACLEMU_API aclnnStatus aclnnRmsNormGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* x,
                                                        const aclTensor* rstd, const aclTensor* gamma,
                                                        const aclTensor* dxOut, const aclTensor* dgammaOut,
                                                        uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnRmsNormGradGetWorkspaceSize", "aclnnRmsNormGrad", workspaceSize, executor,
                 [&] { return rms_norm_grad(dy, x, rstd, gamma, dxOut, dgammaOut); });
}

ACLEMU_API aclnnStatus aclnnRmsNormGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                        aclrtStream stream) {
  return launch("aclnnRmsNormGrad", workspace, workspaceSize, executor, stream);
}

ACLEMU_API aclnnStatus aclnnRmsNormGetWorkspaceSize(const aclTensor* x, const aclTensor* gamma,
                                                    double epsilon, const aclTensor* yOut,
                                                    const aclTensor* rstdOut, uint64_t* workspaceSize,
                                                    aclOpExecutor** executor) {
  return prepare("aclnnRmsNormGetWorkspaceSize", "aclnnRmsNorm", workspaceSize, executor,
                 [&] { return rms_norm(x, gamma, epsilon, yOut, rstdOut); });
}

ACLEMU_API aclnnStatus aclnnRmsNorm(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                    aclrtStream stream) {
  return launch("aclnnRmsNorm", workspace, workspaceSize, executor, stream);
}

static_assert(std::is_same_v<decltype(&aclnnRmsNormGradGetWorkspaceSize), oao::acl::RmsNormGradPrepare>);
static_assert(std::is_same_v<decltype(&aclnnRmsNormGrad), oao::acl::Launch>);
static_assert(std::is_same_v<decltype(&aclnnRmsNormGetWorkspaceSize), oao::acl::RmsNormPrepare>);
static_assert(std::is_same_v<decltype(&aclnnRmsNorm), oao::acl::Launch>);
