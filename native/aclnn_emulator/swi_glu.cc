// libopapi_nn.so: aclnnSwiGlu and aclnnSwiGluGrad. x is cut in halves A, B along dim; the output
// (and yGrad) is x with that axis halved.
#include <cmath>
#include <type_traits>

#include "op.h"
#include "tensor.h"

namespace {

using namespace aclemu;

// x viewed as [outer, 2, half].
struct Halves {
  int64_t outer;
  int64_t half;
  std::vector<int64_t> y;  // x's dims with dim halved
};

Halves check_x(const aclTensor& x, int64_t dim) {
  check_dtype(x, "x", {ACL_FLOAT, ACL_FLOAT16, ACL_BF16});
  if (product() == Product::kOther) fail_product();
  const bool inference = product() == Product::k310P;
  if (inference && x.dtype == ACL_BF16) {
    fail(kErrParamInvalid, "BFLOAT16 is not supported on Atlas inference products (SoC " + soc_name() + ")");
  }
  check_rank(x, "x", 1, 8);
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  if (dim < -rank || dim >= rank) fail(kErrParamInvalid, "dim " + std::to_string(dim) + " is out of range");
  if (numel(x) == 0) fail(kErrParamInvalid, "x must not be empty");
  const size_t axis = static_cast<size_t>(dim < 0 ? dim + rank : dim);
  if (x.dims[axis] % 2 != 0) fail(kErrParamInvalid, "x's dim axis must be even");
  if (inference && x.dims.back() * static_cast<int64_t>(element_size(x.dtype)) % 64 != 0) {
    fail(kErrParamInvalid, "the last axis of x must hold a multiple of 64 bytes on Atlas inference products");
  }
  Halves h{numel({x.dims.begin(), x.dims.begin() + axis}), 0, x.dims};
  h.y[axis] /= 2;
  h.half = numel({h.y.begin() + axis, h.y.end()});
  return h;
}

float sigmoid(float a) { return 1.0f / (1.0f + std::exp(-a)); }

Plan swi_glu(const aclTensor* x_p, int64_t dim, const aclTensor* out_p) {
  const aclTensor& x = need(x_p, "x");
  const aclTensor& out = need(out_p, "out");
  const Halves h = check_x(x, dim);
  check_same_dtype(out, "out", x, "x");
  check_shape(out, "out", h.y, "x's shape with dim halved");
  auto compute = [x_p, out_p, h] {
    const std::vector<float> x = read_floats(*x_p);
    std::vector<float> y(static_cast<size_t>(h.outer * h.half));
    for (int64_t o = 0; o < h.outer; ++o) {
      for (int64_t j = 0; j < h.half; ++j) {
        const float a = x[o * 2 * h.half + j], b = x[(o * 2 + 1) * h.half + j];
        y[o * h.half + j] = a * sigmoid(a) * b;
      }
    }
    write_floats(*out_p, y);
  };
  return Plan{{x_p}, {out_p}, compute};
}

Plan swi_glu_grad(const aclTensor* dy_p, const aclTensor* x_p, int64_t dim, const aclTensor* out_p) {
  const aclTensor& dy = need(dy_p, "yGrad");
  const aclTensor& x = need(x_p, "x");
  const aclTensor& out = need(out_p, "out");
  const Halves h = check_x(x, dim);
  check_same_dtype(dy, "yGrad", x, "x");
  check_same_dtype(out, "out", x, "x");
  check_shape(dy, "yGrad", h.y, "x's shape with dim halved");
  check_shape(out, "out", x.dims, "x's shape");
  auto compute = [dy_p, x_p, out_p, h] {
    const std::vector<float> dy = read_floats(*dy_p), x = read_floats(*x_p);
    std::vector<float> dx(x.size());
    for (int64_t o = 0; o < h.outer; ++o) {
      for (int64_t j = 0; j < h.half; ++j) {
        const int64_t ia = o * 2 * h.half + j, ib = ia + h.half;
        const float a = x[ia], b = x[ib], g = dy[o * h.half + j], s = sigmoid(a);
        dx[ia] = g * (s + s * (1.0f - s) * a) * b;  // the page's formula
        dx[ib] = g * s * a;
      }
    }
    write_floats(*out_p, dx);
  };
  return Plan{{dy_p, x_p}, {out_p}, compute};
}

}  // namespace

ACLEMU_API aclnnStatus aclnnSwiGluGetWorkspaceSize(const aclTensor* x, int64_t dim, const aclTensor* out,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnSwiGluGetWorkspaceSize", "aclnnSwiGlu", workspaceSize, executor,
                 [&] { return swi_glu(x, dim, out); });
}

ACLEMU_API aclnnStatus aclnnSwiGlu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   aclrtStream stream) {
  return launch("aclnnSwiGlu", workspace, workspaceSize, executor, stream);
}

ACLEMU_API aclnnStatus aclnnSwiGluGradGetWorkspaceSize(const aclTensor* yGrad, const aclTensor* x, int64_t dim,
                                                       const aclTensor* out, uint64_t* workspaceSize,
                                                       aclOpExecutor** executor) {
  return prepare("aclnnSwiGluGradGetWorkspaceSize", "aclnnSwiGluGrad", workspaceSize, executor,
                 [&] { return swi_glu_grad(yGrad, x, dim, out); });
}

ACLEMU_API aclnnStatus aclnnSwiGluGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                       aclrtStream stream) {
  return launch("aclnnSwiGluGrad", workspace, workspaceSize, executor, stream);
}

static_assert(std::is_same_v<decltype(&aclnnSwiGluGetWorkspaceSize), oao::acl::SwiGluPrepare>);
static_assert(std::is_same_v<decltype(&aclnnSwiGlu), oao::acl::Launch>);
static_assert(std::is_same_v<decltype(&aclnnSwiGluGradGetWorkspaceSize), oao::acl::SwiGluGradPrepare>);
static_assert(std::is_same_v<decltype(&aclnnSwiGluGrad), oao::acl::Launch>);
