// libopapi_math.so: the reduce family's functions (native/aclnn/standard/reduce.cc calls them):
// aclnnReduceSum, aclnnMean, aclnnAmax, aclnnAmin, aclnnNorm, aclnnProdDim, aclnnCumsum, aclnnCumsumV2,
// aclnnArgMax, aclnnTopk. Each checks what its page and the vendor's ops-math sources (op_api/aclnn_*.cpp)
// check for Atlas A2/A3, in their order and with their codes (161002 throughout, shapes included), and
// computes with plain loops: floats through double, rounded once to the output's type (the device accumulates
// float16 and bfloat16 in float32), integers through int64.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>

#include "aclnn/standard/reduce_abi.h"
#include "math/common.h"

namespace {

using namespace aclemu;
using namespace aclemu::math;

constexpr size_t kMaxRank = 8;

// The vendor's A2/A3 dtype tables, less the types this emulator's element readers do not hold
// (INT16, DOUBLE, the complex ones): those it refuses rather than misread.
constexpr std::initializer_list<aclDataType> kSumTypes = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16,  ACL_INT32,
                                                          ACL_INT64, ACL_INT8,    ACL_UINT8, ACL_BOOL};
constexpr std::initializer_list<aclDataType> kMeanTypes = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT32,
                                                           ACL_INT64, ACL_INT8,    ACL_UINT8};
constexpr std::initializer_list<aclDataType> kMaxMinTypes = kSumTypes;
constexpr std::initializer_list<aclDataType> kCumsumTypes = kMeanTypes;
constexpr std::initializer_list<aclDataType> kArgMaxTypes = kMeanTypes;
constexpr std::initializer_list<aclDataType> kTopkTypes = kMeanTypes;

void check_max_rank(const aclTensor& t, const char* name) {
  if (t.dims.size() > kMaxRank) {
    fail(kErrParamInvalid,
         std::string(name) + " has " + std::to_string(t.dims.size()) + " axes, more than 8");
  }
}

// 161002 for the vendor's out-shape checks (CheckShapeAndScalarSame, OP_CHECK_SHAPE_NOT_EQUAL).
void check_out(const aclTensor& out, const char* name, const std::vector<int64_t>& want) {
  if (out.dims != want) {
    fail(kErrParamInvalid,
         std::string(name) + " shape " + shape_text(out.dims) + " must be " + shape_text(want));
  }
}

// `dim` of a tensor of `rank` axes made non-negative; in [-rank, rank-1], a scalar's in [-1, 0].
int64_t wrap_dim(int64_t dim, size_t rank, const char* name) {
  const int64_t r = std::max<int64_t>(static_cast<int64_t>(rank), 1);
  if (dim < -r || dim >= r) {
    fail(kErrParamInvalid, std::string(name) + " " + std::to_string(dim) + " is outside [" +
                               std::to_string(-r) + ", " + std::to_string(r - 1) + "]");
  }
  return dim < 0 ? dim + r : dim;
}

// Which of self's axes `dims` reduces (none listed: all), none twice; aclnnAmax and aclnnAmin
// (`nonempty`) also refuse to reduce an axis of size 0.
std::vector<bool> reduce_mask(const aclTensor& self, const std::vector<int64_t>& dims, bool nonempty) {
  const size_t rank = self.dims.size();
  std::vector<bool> mask(std::max<size_t>(rank, 1), dims.empty());
  for (const int64_t dim : dims) {
    const int64_t k = wrap_dim(dim, rank, "dim");
    if (nonempty && rank > 0 && self.dims[k] == 0) {
      fail(kErrParamInvalid,
           "reduced dim " + std::to_string(k) + " of self " + shape_text(self.dims) + " has size 0");
    }
    if (mask[k]) fail(kErrParamInvalid, "dim " + std::to_string(k) + " appears more than once in dims");
    mask[k] = true;
  }
  mask.resize(rank);
  return mask;
}

// self's shape with the reduced axes as 1 (keep) or dropped.
std::vector<int64_t> reduced_dims(const std::vector<int64_t>& dims, const std::vector<bool>& mask,
                                  bool keep) {
  std::vector<int64_t> out;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (!mask[k]) {
      out.push_back(dims[k]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  return out;
}

enum class Reduction { kSum, kMean, kMax, kMin };

// Integers (and bools) exactly through int64, floats through double.
template <class V>
std::vector<V> load(const aclTensor& t) {
  if constexpr (std::is_same_v<V, int64_t>) {
    return read_ints(t);
  } else {
    return read(t);
  }
}

void store(const aclTensor& t, const std::vector<int64_t>& values) { write_ints(t, values); }
void store(const aclTensor& t, const std::vector<double>& values) { write(t, values); }

// Whether a ranks before b: the larger (`largest`) or the smaller value, NaN counting as larger
// than every number, as torch's max and topk order it.
template <class V>
bool before(V a, V b, bool largest) {
  if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(a) || std::isnan(b)) {
      return largest ? std::isnan(a) && !std::isnan(b) : std::isnan(b) && !std::isnan(a);
    }
  }
  return largest ? a > b : a < b;
}

template <class V>
void reduce_values(Reduction kind, const aclTensor& self, const aclTensor& out,
                   const std::vector<int64_t>& kept) {
  const std::vector<V> x = load<V>(self);
  const std::vector<int64_t> into = broadcast_index(self.dims, kept);
  const size_t n = static_cast<size_t>(numel(kept));
  std::vector<V> y(n, V(0));
  std::vector<bool> seen(n, false);
  for (size_t i = 0; i < x.size(); ++i) {
    V& acc = y[into[i]];
    if (kind == Reduction::kSum || kind == Reduction::kMean) {
      acc += x[i];
    } else if (!seen[into[i]]) {
      acc = x[i];
    } else if constexpr (std::is_floating_point_v<V>) {
      if (std::isnan(x[i]) || std::isnan(acc)) {
        acc = std::numeric_limits<V>::quiet_NaN();
      } else {
        acc = kind == Reduction::kMax ? std::max(acc, x[i]) : std::min(acc, x[i]);
      }
    } else {
      acc = kind == Reduction::kMax ? std::max(acc, x[i]) : std::min(acc, x[i]);
    }
    seen[into[i]] = true;
  }
  if constexpr (std::is_floating_point_v<V>) {
    if (kind == Reduction::kMean) {
      const double count =
          static_cast<double>(numel(self.dims)) / static_cast<double>(std::max<size_t>(n, 1));
      for (V& v : y) v = count == 0 ? std::numeric_limits<V>::quiet_NaN() : v / count;
    }
  }
  store(out, y);
}

// aclnnReduceSum and aclnnMean (`dtype` set: the type they compute in, which must be out's), aclnnAmax
// and aclnnAmin.
Plan reduction(Reduction kind, const aclTensor* self_p, const aclIntArray* dims_p, bool keep,
               const aclDataType* dtype, const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const std::vector<int64_t>& dims = need_array(dims_p, kind == Reduction::kSum ? "dims" : "dim");
  const aclTensor& out = need(out_p, "out");
  const bool max_min = kind == Reduction::kMax || kind == Reduction::kMin;
  const std::initializer_list<aclDataType> types = kind == Reduction::kSum    ? kSumTypes
                                                   : kind == Reduction::kMean ? kMeanTypes
                                                                              : kMaxMinTypes;
  if (max_min) check_same_dtype(out, "out", self, "self");
  check_dtype(self, "self", types);
  check_dtype(out, "out", types);
  if (dtype != nullptr) {
    if (std::find(types.begin(), types.end(), *dtype) == types.end()) {
      fail(kErrParamInvalid, "dtype " + dtype_name(*dtype) + " is not supported");
    }
    if (*dtype != out.dtype) {
      fail(kErrParamInvalid, "dtype " + dtype_name(*dtype) + " is not out's " + dtype_name(out.dtype));
    }
  }
  check_max_rank(self, "self");
  const std::vector<bool> mask = reduce_mask(self, dims, max_min);
  check_max_rank(out, "out");
  const std::vector<int64_t> kept = reduced_dims(self.dims, mask, true);
  check_out(out, "out", reduced_dims(self.dims, mask, keep));
  auto compute = [kind, self_p, out_p, kept] {
    // Sums of floats, and every mean, go through double; the rest stay integers.
    if (is_float(self_p->dtype) || is_float(out_p->dtype) || kind == Reduction::kMean) {
      reduce_values<double>(kind, *self_p, *out_p, kept);
    } else {
      reduce_values<int64_t>(kind, *self_p, *out_p, kept);
    }
  };
  return {{self_p}, {out_p}, compute};
}

// aclnnNorm for a finite p > 0 (what ReduceL2 calls): (sum |x|^p)^(1/p) through double, in
// self's type; the page's other norms (0, inf, -inf) this emulator refuses rather than guesses.
Plan norm(const aclTensor* self_p, const aclScalar* p_p, const aclIntArray* dims_p, bool keep,
          const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const double p = need_scalar(p_p, "p").value;
  const std::vector<int64_t>& dims = need_array(dims_p, "dim");
  const aclTensor& out = need(out_p, "out");
  check_dtype(self, "self", kFloatTypes);
  check_same_dtype(out, "out", self, "self");
  if (!(std::isfinite(p) && p > 0)) fail(kErrParamInvalid, "p " + std::to_string(p) + " is not emulated");
  check_max_rank(self, "self");
  const std::vector<bool> mask = reduce_mask(self, dims, false);
  const std::vector<int64_t> kept = reduced_dims(self.dims, mask, true);
  check_out(out, "out", reduced_dims(self.dims, mask, keep));
  auto compute = [self_p, out_p, kept, p] {
    const std::vector<double> x = read(*self_p);
    const std::vector<int64_t> into = broadcast_index(self_p->dims, kept);
    std::vector<double> y(static_cast<size_t>(numel(kept)), 0.0);
    for (size_t i = 0; i < x.size(); ++i) y[into[i]] += std::pow(std::fabs(x[i]), p);
    for (double& v : y) v = std::pow(v, 1.0 / p);
    write(*out_p, y);
  };
  return {{self_p}, {out_p}, compute};
}

// aclnnProdDim's types on A2/A3 (its page), less those the element readers do not hold.
constexpr std::initializer_list<aclDataType> kProdTypes = kSumTypes;

template <class V>
void multiply_along(const aclTensor& self, const aclTensor& out, const std::vector<int64_t>& kept) {
  const std::vector<V> x = load<V>(self);
  const std::vector<int64_t> into = broadcast_index(self.dims, kept);
  std::vector<V> y(static_cast<size_t>(numel(kept)), V(1));  // a product over no values is 1
  for (size_t i = 0; i < x.size(); ++i) y[into[i]] *= x[i];
  store(out, y);
}

Plan prod_dim(const aclTensor* self_p, int64_t dim, bool keep, aclDataType dtype, const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& out = need(out_p, "out");
  check_dtype(self, "self", kProdTypes);
  check_dtype(out, "out", kProdTypes);
  if (dtype != out.dtype) {
    fail(kErrParamInvalid, "dtype " + dtype_name(dtype) + " is not out's " + dtype_name(out.dtype));
  }
  check_max_rank(self, "self");
  std::vector<bool> mask(self.dims.size(), false);
  if (!self.dims.empty()) mask[wrap_dim(dim, self.dims.size(), "dim")] = true;
  const std::vector<int64_t> kept = reduced_dims(self.dims, mask, true);
  check_out(out, "out", reduced_dims(self.dims, mask, keep));
  auto compute = [self_p, out_p, kept] {
    if (is_float(self_p->dtype) || is_float(out_p->dtype)) {
      multiply_along<double>(*self_p, *out_p, kept);
    } else {
      multiply_along<int64_t>(*self_p, *out_p, kept);
    }
  };
  return {{self_p}, {out_p}, compute};
}

// The tensor as [outer, length, inner] around axis `dim` (a scalar as [1, 1, 1]).
struct Around {
  int64_t outer = 1, length = 1, inner = 1;
};

Around around(const std::vector<int64_t>& dims, int64_t dim) {
  Around a;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = dims[k];
    if (static_cast<int64_t>(k) < dim) {
      a.outer *= d;
    } else if (static_cast<int64_t>(k) == dim) {
      a.length = d;
    } else {
      a.inner *= d;
    }
  }
  return a;
}

template <class V>
void cumulate(const aclTensor& self, const aclTensor& out, int64_t dim, bool exclusive, bool reverse) {
  const std::vector<V> x = load<V>(self);
  std::vector<V> y(x.size());
  const Around a = around(self.dims, dim);
  for (int64_t o = 0; o < a.outer; ++o) {
    for (int64_t i = 0; i < a.inner; ++i) {
      V sum = 0;
      for (int64_t step = 0; step < a.length; ++step) {
        const int64_t j = reverse ? a.length - 1 - step : step;
        const size_t at = static_cast<size_t>((o * a.length + j) * a.inner + i);
        if (exclusive) {
          y[at] = sum;
          sum += x[at];
        } else {
          sum += x[at];
          y[at] = sum;
        }
      }
    }
  }
  store(out, y);
}

Plan cumsum(const aclTensor* self_p, int64_t dim, const aclDataType* dtype, bool exclusive, bool reverse,
            const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& out = need(out_p, "out");
  check_dtype(self, "self", kCumsumTypes);
  check_dtype(out, "out", kCumsumTypes);
  if (dtype == nullptr) {
    check_same_dtype(out, "out", self, "self");
  } else if (*dtype != out.dtype) {
    fail(kErrParamInvalid, "dtype " + dtype_name(*dtype) + " is not out's " + dtype_name(out.dtype));
  }
  check_out(out, "out", self.dims);
  check_max_rank(self, "self");
  const int64_t axis = wrap_dim(dim, self.dims.size(), "dim");
  auto compute = [self_p, out_p, axis, exclusive, reverse] {
    if (is_float(out_p->dtype)) {
      cumulate<double>(*self_p, *out_p, axis, exclusive, reverse);
    } else {
      cumulate<int64_t>(*self_p, *out_p, axis, exclusive, reverse);
    }
  };
  return {{self_p}, {out_p}, compute};
}

// For each [outer, inner] line along `dim`: the indices of its elements in order, best first
// (ties: the lower index first, as the vendor's TopK kernels order them), the first `k` kept.
template <class V>
void rank_lines(const aclTensor& self, int64_t dim, int64_t k, bool largest, const aclTensor* values,
                const aclTensor& indices) {
  const std::vector<V> x = load<V>(self);
  const Around a = around(self.dims, dim);
  const size_t n = static_cast<size_t>(a.outer * k * a.inner);
  std::vector<V> top(n);
  std::vector<int64_t> where(n);
  std::vector<int64_t> order(static_cast<size_t>(a.length));
  for (int64_t o = 0; o < a.outer; ++o) {
    for (int64_t i = 0; i < a.inner; ++i) {
      const auto at = [&](int64_t j) { return static_cast<size_t>((o * a.length + j) * a.inner + i); };
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t p, int64_t q) { return before(x[at(p)], x[at(q)], largest); });
      for (int64_t j = 0; j < k; ++j) {
        const size_t slot = static_cast<size_t>((o * k + j) * a.inner + i);
        top[slot] = x[at(order[j])];
        where[slot] = order[j];
      }
    }
  }
  if (values != nullptr) store(*values, top);
  write_ints(indices, where);
}

template <class F>
void by_type(const aclTensor& t, F&& f) {
  if (is_float(t.dtype)) {
    f(double{});
  } else {
    f(int64_t{});
  }
}

}  // namespace

ACLEMU_TWO_PHASES(aclnnReduceSum,
                  (const aclTensor* self, const aclIntArray* dims, bool keepDims, aclDataType dtype,
                   const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor),
                  reduction(Reduction::kSum, self, dims, keepDims, &dtype, out))
static_assert(std::is_same_v<decltype(&aclnnReduceSumGetWorkspaceSize), oao::acl::ReduceDtypePrepare>);

ACLEMU_TWO_PHASES(aclnnMean,
                  (const aclTensor* self, const aclIntArray* dim, bool keepDim, aclDataType dtype,
                   const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor),
                  reduction(Reduction::kMean, self, dim, keepDim, &dtype, out))
static_assert(std::is_same_v<decltype(&aclnnMeanGetWorkspaceSize), oao::acl::ReduceDtypePrepare>);

ACLEMU_TWO_PHASES(aclnnAmax,
                  (const aclTensor* self, const aclIntArray* dim, bool keepDim, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  reduction(Reduction::kMax, self, dim, keepDim, nullptr, out))
static_assert(std::is_same_v<decltype(&aclnnAmaxGetWorkspaceSize), oao::acl::ReducePrepare>);

ACLEMU_TWO_PHASES(aclnnAmin,
                  (const aclTensor* self, const aclIntArray* dim, bool keepDim, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  reduction(Reduction::kMin, self, dim, keepDim, nullptr, out))
static_assert(std::is_same_v<decltype(&aclnnAminGetWorkspaceSize), oao::acl::ReducePrepare>);

ACLEMU_TWO_PHASES(aclnnNorm,
                  (const aclTensor* self, const aclScalar* p, const aclIntArray* dim, bool keepDim,
                   const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor),
                  norm(self, p, dim, keepDim, out))
static_assert(std::is_same_v<decltype(&aclnnNormGetWorkspaceSize), oao::acl::NormPrepare>);

ACLEMU_TWO_PHASES(aclnnProdDim,
                  (const aclTensor* self, int64_t dim, bool keepDim, aclDataType dtype, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  prod_dim(self, dim, keepDim, dtype, out))
static_assert(std::is_same_v<decltype(&aclnnProdDimGetWorkspaceSize), oao::acl::ProdDimPrepare>);

ACLEMU_TWO_PHASES(aclnnCumsum,
                  (const aclTensor* self, int64_t dim, aclDataType dtype, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  cumsum(self, dim, &dtype, false, false, out))
static_assert(std::is_same_v<decltype(&aclnnCumsumGetWorkspaceSize), oao::acl::CumsumPrepare>);

ACLEMU_TWO_PHASES(aclnnCumsumV2,
                  (const aclTensor* self, int64_t dim, bool exclusive, bool reverse, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  cumsum(self, dim, nullptr, exclusive, reverse, out))
static_assert(std::is_same_v<decltype(&aclnnCumsumV2GetWorkspaceSize), oao::acl::CumsumV2Prepare>);

ACLEMU_TWO_PHASES(aclnnArgMax,
                  (const aclTensor* self, int64_t dim, bool keepdim, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  [&] {
                    const aclTensor& x = need(self, "self");
                    const aclTensor& y = need(out, "out");
                    check_dtype(x, "self", kArgMaxTypes);
                    check_dtype(y, "out", {ACL_INT32, ACL_INT64});
                    check_max_rank(x, "self");
                    check_max_rank(y, "out");
                    const int64_t axis = wrap_dim(dim, x.dims.size(), "dim");
                    // The vendor returns before its shape check when either tensor is empty.
                    if (numel(x) > 0 && numel(y) > 0) {
                      std::vector<bool> mask(x.dims.size(), false);
                      if (!mask.empty()) mask[axis] = true;
                      check_out(y, "out", reduced_dims(x.dims, mask, keepdim));
                    }
                    auto compute = [self, out, axis] {
                      if (numel(*self) == 0) return;
                      by_type(*self, [&](auto zero) {
                        rank_lines<decltype(zero)>(*self, axis, 1, true, nullptr, *out);
                      });
                    };
                    return Plan{{self}, {out}, compute};
                  }())
static_assert(std::is_same_v<decltype(&aclnnArgMaxGetWorkspaceSize), oao::acl::ArgMaxPrepare>);

ACLEMU_TWO_PHASES(
    aclnnTopk,
    (const aclTensor* self, int64_t k, int64_t dim, bool largest, bool sorted, const aclTensor* valuesOut,
     const aclTensor* indicesOut, uint64_t* workspaceSize, aclOpExecutor** executor),
    [&] {
      const aclTensor& x = need(self, "self");
      const aclTensor& values = need(valuesOut, "valuesOut");
      const aclTensor& indices = need(indicesOut, "indicesOut");
      check_dtype(x, "self", kTopkTypes);
      check_same_dtype(values, "valuesOut", x, "self");
      check_dtype(indices, "indicesOut", {ACL_INT64});
      if (x.dims.empty() || x.dims.size() > kMaxRank) {
        fail(kErrParamInvalid, "self has " + std::to_string(x.dims.size()) + " axes, outside 1..8");
      }
      const int64_t axis = wrap_dim(dim, x.dims.size(), "dim");
      if (k < 0 || k > x.dims[axis]) {
        fail(kErrParamInvalid, "k " + std::to_string(k) + " is outside [0, " + std::to_string(x.dims[axis]) +
                                   "], the size of dim " + std::to_string(axis));
      }
      // The page: "sorted currently only supports true".
      if (!sorted) fail(kErrParamInvalid, "sorted must be true");
      std::vector<int64_t> shape = x.dims;
      shape[axis] = k;
      check_out(values, "valuesOut", shape);
      check_out(indices, "indicesOut", shape);
      auto compute = [self, valuesOut, indicesOut, axis, k, largest] {
        if (numel(*valuesOut) == 0) return;
        by_type(*self, [&](auto zero) {
          rank_lines<decltype(zero)>(*self, axis, k, largest, valuesOut, *indicesOut);
        });
      };
      return Plan{{self}, {valuesOut, indicesOut}, compute};
    }())
static_assert(std::is_same_v<decltype(&aclnnTopkGetWorkspaceSize), oao::acl::TopkPrepare>);
