// libopapi_transformer.so, part 1: aclnnRotaryPositionEmbedding and its grad.
// Every mode is y[i] = x[a(i)] * cos[i] + sign(i) * x[b(i)] * sin[i] along the last axis, with a
// and b permutations: the grad scatters dy back through the same a, b and sign.
#include <string>
#include <type_traits>

#include "op.h"
#include "tensor.h"

namespace {

using namespace aclemu;

struct Rotation {
  std::vector<int64_t> a, b;
  std::vector<float> sign;
};

// Mode 0 half, 1 interleave, 2 quarter; mode 3 de-interleaves x first, then rotates as mode 0.
Rotation rotation(int64_t d, int64_t mode) {
  Rotation r{std::vector<int64_t>(d), std::vector<int64_t>(d), std::vector<float>(d)};
  const int64_t half = d / 2, quarter = d / 4;
  for (int64_t i = 0; i < d; ++i) {
    int64_t partner;
    bool first;  // of its pair: rotates to minus its partner
    if (mode == 1) {
      first = i % 2 == 0;
      partner = first ? i + 1 : i - 1;
    } else if (mode == 2) {
      first = (i / quarter) % 2 == 0;
      partner = first ? i + quarter : i - quarter;
    } else {
      first = i < half;
      partner = first ? i + half : i - half;
    }
    r.sign[i] = first ? -1.0f : 1.0f;
    if (mode == 3) {
      auto evens_then_odds = [half](int64_t j) { return j < half ? 2 * j : 2 * (j - half) + 1; };
      r.a[i] = evens_then_odds(i);
      r.b[i] = evens_then_odds(partner);
    } else {
      r.a[i] = i;
      r.b[i] = partner;
    }
  }
  return r;
}

// The cos/sin row each data row reads: leading axes of size 1 in the table broadcast.
std::vector<int64_t> table_rows(const std::vector<int64_t>& data_dims,
                                const std::vector<int64_t>& table_dims) {
  const size_t lead = data_dims.size() - 1;
  const std::vector<int64_t> data_lead(data_dims.begin(), data_dims.begin() + lead);
  std::vector<int64_t> rows(static_cast<size_t>(numel(data_lead)));
  std::vector<int64_t> index(lead, 0);
  for (int64_t& row : rows) {
    int64_t table_row = 0;
    for (size_t k = 0; k < lead; ++k)
      table_row = table_row * table_dims[k] + (table_dims[k] == 1 ? 0 : index[k]);
    row = table_row;
    for (size_t k = lead; k-- > 0;) {
      if (++index[k] < data_dims[k]) break;
      index[k] = 0;
    }
  }
  return rows;
}

// Dtype, product, mode and shape rules shared by the forward (data = x) and the grad (data = dy).
void check_rotary_position_embedding(const aclTensor& data, const char* data_name, const aclTensor& cos, const aclTensor& sin,
                int64_t mode, bool is_grad) {
  check_dtype(data, data_name, {ACL_FLOAT, ACL_FLOAT16, ACL_BF16});
  check_same_dtype(cos, "cos", data, data_name);
  check_same_dtype(sin, "sin", data, data_name);
  const Product p = product();
  if (p == Product::k310P && data.dtype == ACL_BF16) {
    fail(kErrParamInvalid, "BFLOAT16 is not supported on Atlas inference products (SoC " + soc_name() + ")");
  }
  if (mode < 0 || mode > 3) fail(kErrTiling, "mode " + std::to_string(mode) + " outside 0..3");
  if (p == Product::kOther || (p == Product::k310P && is_grad)) fail_product();
  const int64_t max_mode = p == Product::k950 ? 3 : p == Product::k310P ? 0 : 1;
  if (mode > max_mode) {
    fail(kErrTiling,
         "mode " + std::to_string(mode) + " not supported on this product (SoC " + soc_name() + ")");
  }
  check_rank(data, data_name, p == Product::k950 && is_grad ? 4 : 3, 4);  // 950's grad page: 4-D only
  check_shape(sin, "sin", cos.dims, "cos's shape");
  if (cos.dims.size() != data.dims.size()) {
    fail(kErrTiling, "cos rank " + std::to_string(cos.dims.size()) + " must equal " + data_name + " rank");
  }
  for (size_t k = 0; k + 1 < cos.dims.size(); ++k) {
    if (cos.dims[k] != data.dims[k] && cos.dims[k] != 1) {
      fail(kErrTiling, "cos shape " + shape_text(cos.dims) + " does not broadcast to " + data_name +
                           " shape " + shape_text(data.dims));
    }
  }
  const int64_t d = data.dims.back();
  if (cos.dims.back() != d)
    fail(kErrTiling, "the last axis of cos must equal that of " + std::string(data_name));
  if (d % (mode == 2 ? 4 : 2) != 0) {
    fail(kErrTiling, "last axis " + std::to_string(d) + " must be a multiple of " + (mode == 2 ? "4" : "2"));
  }
  if (p == Product::k950 && d > 1024) fail(kErrTiling, "last axis must be at most 1024");
  if ((p == Product::kA2 || p == Product::kA3) && d >= 896) fail(kErrTiling, "last axis must be below 896");
  if (p == Product::k310P && (d > 128 || d % 32 != 0)) {
    fail(kErrTiling, "last axis must be a multiple of 32 and at most 128 on Atlas inference products");
  }
}

Plan rope(const aclTensor* x_p, const aclTensor* cos_p, const aclTensor* sin_p, int64_t mode,
          const aclTensor* out_p) {
  const aclTensor& x = need(x_p, "x");
  const aclTensor& cos = need(cos_p, "cos");
  const aclTensor& sin = need(sin_p, "sin");
  const aclTensor& out = need(out_p, "out");
  check_same_dtype(out, "out", x, "x");
  check_contiguous(out, "out");
  check_rotary_position_embedding(x, "x", cos, sin, mode, false);
  check_shape(out, "out", x.dims, "x's shape");
  auto compute = [x_p, cos_p, sin_p, out_p, mode] {
    const int64_t d = x_p->dims.back();
    const std::vector<float> x = read_floats(*x_p), cos = read_floats(*cos_p), sin = read_floats(*sin_p);
    const Rotation r = rotation(d, mode);
    const std::vector<int64_t> rows = table_rows(x_p->dims, cos_p->dims);
    std::vector<float> y(x.size());
    for (size_t row = 0; row < rows.size(); ++row) {
      const float* xr = &x[row * d];
      const int64_t t = rows[row] * d;
      for (int64_t i = 0; i < d; ++i)
        y[row * d + i] = xr[r.a[i]] * cos[t + i] + r.sign[i] * xr[r.b[i]] * sin[t + i];
    }
    write_floats(*out_p, y);
  };
  return Plan{{x_p, cos_p, sin_p}, {out_p}, compute};
}

Plan rope_grad(const aclTensor* dy_p, const aclTensor* cos_p, const aclTensor* sin_p, const aclTensor* x_p,
               int64_t mode, const aclTensor* dx_p, const aclTensor* dcos_p, const aclTensor* dsin_p) {
  const aclTensor& dy = need(dy_p, "dy");
  const aclTensor& cos = need(cos_p, "cos");
  const aclTensor& sin = need(sin_p, "sin");
  const aclTensor& dx = need(dx_p, "dxOut");
  const bool with_x = x_p != nullptr;  // without x, dcosOut and dsinOut are not computed
  std::vector<const aclTensor*> inputs{dy_p, cos_p, sin_p}, outputs{dx_p};
  if (with_x) {
    need(x_p, "xOptional");
    need(dcos_p, "dcosOut");
    need(dsin_p, "dsinOut");
    inputs.push_back(x_p);
    outputs.insert(outputs.end(), {dcos_p, dsin_p});
  }
  check_same_dtype(dx, "dxOut", dy, "dy");
  check_contiguous(dx, "dxOut");
  if (with_x) {
    check_same_dtype(*x_p, "xOptional", dy, "dy");
    check_same_dtype(*dcos_p, "dcosOut", dy, "dy");
    check_same_dtype(*dsin_p, "dsinOut", dy, "dy");
    check_contiguous(*dcos_p, "dcosOut");
    check_contiguous(*dsin_p, "dsinOut");
  }
  check_rotary_position_embedding(dy, "dy", cos, sin, mode, true);
  check_shape(dx, "dxOut", dy.dims, "dy's shape");
  if (with_x) {
    check_shape(*x_p, "xOptional", dy.dims, "dy's shape");
    check_shape(*dcos_p, "dcosOut", cos.dims, "cos's shape");
    check_shape(*dsin_p, "dsinOut", cos.dims, "cos's shape");
  }
  auto compute = [dy_p, cos_p, sin_p, x_p, dx_p, dcos_p, dsin_p, mode, with_x] {
    const int64_t d = dy_p->dims.back();
    const std::vector<float> dy = read_floats(*dy_p), cos = read_floats(*cos_p), sin = read_floats(*sin_p);
    const std::vector<float> x = with_x ? read_floats(*x_p) : std::vector<float>();
    const Rotation r = rotation(d, mode);
    const std::vector<int64_t> rows = table_rows(dy_p->dims, cos_p->dims);
    std::vector<float> dx(dy.size(), 0.0f), dcos(cos.size(), 0.0f), dsin(cos.size(), 0.0f);
    for (size_t row = 0; row < rows.size(); ++row) {
      const size_t base = row * d;
      const int64_t t = rows[row] * d;
      for (int64_t i = 0; i < d; ++i) {
        const float g = dy[base + i];
        dx[base + r.a[i]] += g * cos[t + i];
        dx[base + r.b[i]] += r.sign[i] * g * sin[t + i];
        if (with_x) {
          dcos[t + i] += g * x[base + r.a[i]];
          dsin[t + i] += g * r.sign[i] * x[base + r.b[i]];
        }
      }
    }
    write_floats(*dx_p, dx);
    if (with_x) {
      write_floats(*dcos_p, dcos);
      write_floats(*dsin_p, dsin);
    }
  };
  return Plan{inputs, outputs, compute};
}

}  // namespace

ACLEMU_API aclnnStatus aclnnRotaryPositionEmbeddingGetWorkspaceSize(const aclTensor* x, const aclTensor* cos,
                                                                    const aclTensor* sin, int64_t mode,
                                                                    const aclTensor* out,
                                                                    uint64_t* workspaceSize,
                                                                    aclOpExecutor** executor) {
  return prepare("aclnnRotaryPositionEmbeddingGetWorkspaceSize", "aclnnRotaryPositionEmbedding",
                 workspaceSize, executor, [&] { return rope(x, cos, sin, mode, out); });
}

ACLEMU_API aclnnStatus aclnnRotaryPositionEmbedding(void* workspace, uint64_t workspaceSize,
                                                    aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnRotaryPositionEmbedding", workspace, workspaceSize, executor, stream);
}

ACLEMU_API aclnnStatus aclnnRotaryPositionEmbeddingGradGetWorkspaceSize(
    const aclTensor* dy, const aclTensor* cos, const aclTensor* sin, const aclTensor* xOptional, int64_t mode,
    const aclTensor* dxOut, const aclTensor* dcosOut, const aclTensor* dsinOut, uint64_t* workspaceSize,
    aclOpExecutor** executor) {
  return prepare("aclnnRotaryPositionEmbeddingGradGetWorkspaceSize", "aclnnRotaryPositionEmbeddingGrad",
                 workspaceSize, executor,
                 [&] { return rope_grad(dy, cos, sin, xOptional, mode, dxOut, dcosOut, dsinOut); });
}

ACLEMU_API aclnnStatus aclnnRotaryPositionEmbeddingGrad(void* workspace, uint64_t workspaceSize,
                                                        aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnRotaryPositionEmbeddingGrad", workspace, workspaceSize, executor, stream);
}

static_assert(std::is_same_v<decltype(&aclnnRotaryPositionEmbeddingGetWorkspaceSize), oao::acl::RotaryPositionEmbeddingPrepare>);
static_assert(std::is_same_v<decltype(&aclnnRotaryPositionEmbedding), oao::acl::Launch>);
static_assert(
    std::is_same_v<decltype(&aclnnRotaryPositionEmbeddingGradGetWorkspaceSize), oao::acl::RotaryPositionEmbeddingGradPrepare>);
static_assert(std::is_same_v<decltype(&aclnnRotaryPositionEmbeddingGrad), oao::acl::Launch>);
