// libopapi_math.so: the elementwise functions (aclnnAdd and its kin, comparisons, logic,
// activations, remainders, aclnnMuls, aclnnSWhere, aclnnCast). Each checks what its page lists for Atlas
// A2/A3: element types, broadcastable shapes, an out of the broadcast shape; computes through double per
// element.
#include <cmath>
#include <functional>
#include <type_traits>

#include "aclnn/standard/elementwise_abi.h"
#include "aclnn/standard/matmul_abi.h"
#include "math/common.h"

namespace {

using namespace aclemu;
using namespace aclemu::math;

using Unary = std::function<double(double)>;
using Binary = std::function<double(double, double)>;

// out = f(self, other) with broadcasting; `types` the element types self and other may have.
Plan binary(const aclTensor* self_p, const aclTensor* other_p, const aclTensor* out_p, Binary f,
            std::initializer_list<aclDataType> types, std::initializer_list<aclDataType> out_types) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& other = need(other_p, "other");
  const aclTensor& out = need(out_p, "out");
  check_dtype(self, "self", types);
  check_dtype(other, "other", types);
  check_dtype(out, "out", out_types);
  check_rank(self, "self", 0, 8);
  check_rank(other, "other", 0, 8);
  const std::vector<int64_t> shape = broadcast_shape(self, "self", other, "other");
  check_out_shape(out, "out", shape);
  auto compute = [self_p, other_p, out_p, shape, f] {
    const std::vector<double> a = read(*self_p), b = read(*other_p);
    const std::vector<int64_t> ia = broadcast_index(shape, self_p->dims),
                               ib = broadcast_index(shape, other_p->dims);
    std::vector<double> y(ia.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] = f(a[ia[i]], b[ib[i]]);
    write(*out_p, y);
  };
  return {{self_p, other_p}, {out_p}, compute};
}

Plan unary(const aclTensor* self_p, const aclTensor* out_p, Unary f, std::initializer_list<aclDataType> types,
           bool same_type = true) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& out = need(out_p, "out");
  check_dtype(self, "self", types);
  if (same_type) check_same_dtype(out, "out", self, "self");
  check_rank(self, "self", 0, 8);
  check_out_shape(out, "out", self.dims);
  auto compute = [self_p, out_p, f] {
    std::vector<double> x = read(*self_p);
    for (double& v : x) v = f(v);
    write(*out_p, x);
  };
  return {{self_p}, {out_p}, compute};
}

// Integer results of float formulas stay integers (aclnnAdd on int64 adds exactly).
double exact_sum(double a, double b, double alpha, bool integer) {
  if (!integer) return a + alpha * b;
  return static_cast<double>(static_cast<int64_t>(a) + static_cast<int64_t>(alpha) * static_cast<int64_t>(b));
}

}  // namespace

#define ACLEMU_ALPHA_BINARY(name, sign)                                                                      \
  ACLEMU_TWO_PHASES(name,                                                                                    \
                    (const aclTensor* self, const aclTensor* other, const aclScalar* alpha,                  \
                     const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor),               \
                    [&] {                                                                                    \
                      const double a = need_scalar(alpha, "alpha").value;                                    \
                      const bool integer = self != nullptr && is_integer(self->dtype);                       \
                      return binary(                                                                         \
                          self, other, out,                                                                  \
                          [a, integer](double x, double y) { return exact_sum(x, y, (sign) * a, integer); }, \
                          kNumberTypes, kNumberTypes);                                                       \
                    }())                                                                                     \
  static_assert(std::is_same_v<decltype(&name##GetWorkspaceSize), oao::acl::AlphaBinaryPrepare>);

#define ACLEMU_BINARY(name, types, out_types, f)                                          \
  ACLEMU_TWO_PHASES(name,                                                                 \
                    (const aclTensor* self, const aclTensor* other, const aclTensor* out, \
                     uint64_t* workspaceSize, aclOpExecutor** executor),                  \
                    binary(self, other, out, f, types, out_types))                        \
  static_assert(std::is_same_v<decltype(&name##GetWorkspaceSize), oao::acl::BinaryPrepare>);

#define ACLEMU_UNARY(name, types, f)                                                                    \
  ACLEMU_TWO_PHASES(                                                                                    \
      name,                                                                                             \
      (const aclTensor* self, const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor), \
      unary(self, out, f, types))                                                                       \
  static_assert(std::is_same_v<decltype(&name##GetWorkspaceSize), oao::acl::UnaryPrepare>);

ACLEMU_ALPHA_BINARY(aclnnAdd, 1.0)
ACLEMU_ALPHA_BINARY(aclnnSub, -1.0)
ACLEMU_BINARY(aclnnMul, kNumberTypes, kNumberTypes, [](double a, double b) { return a * b; })
ACLEMU_BINARY(aclnnDiv, kNumberTypes, kFloatTypes, [](double a, double b) { return a / b; })
ACLEMU_BINARY(aclnnMaximum, kNumberTypes, kNumberTypes,
              [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); })
ACLEMU_BINARY(aclnnMinimum, kNumberTypes, kNumberTypes,
              [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); })
ACLEMU_BINARY(aclnnPowTensorTensor, kNumberTypes, kNumberTypes,
              [](double a, double b) { return std::pow(a, b); })
ACLEMU_BINARY(aclnnEqTensor, kAllTypes, kAllTypes, [](double a, double b) { return double(a == b); })
// NaN differs from everything, itself included (the standard ops' IsNaN is x != x).
ACLEMU_BINARY(aclnnNeTensor, kAllTypes, kAllTypes, [](double a, double b) { return double(a != b); })
ACLEMU_BINARY(aclnnLtTensor, kNumberTypes, kAllTypes, [](double a, double b) { return double(a < b); })
ACLEMU_BINARY(aclnnLeTensor, kNumberTypes, kAllTypes, [](double a, double b) { return double(a <= b); })
ACLEMU_BINARY(aclnnGtTensor, kNumberTypes, kAllTypes, [](double a, double b) { return double(a > b); })
ACLEMU_BINARY(aclnnGeTensor, kNumberTypes, kAllTypes, [](double a, double b) { return double(a >= b); })
ACLEMU_BINARY(aclnnLogicalAnd, kAllTypes, kAllTypes,
              [](double a, double b) { return double(a != 0 && b != 0); })
ACLEMU_BINARY(aclnnLogicalOr, kAllTypes, kAllTypes,
              [](double a, double b) { return double(a != 0 || b != 0); })
ACLEMU_BINARY(aclnnLogicalXor, kAllTypes, kAllTypes,
              [](double a, double b) { return double((a != 0) != (b != 0)); })

ACLEMU_TWO_PHASES(aclnnDivMod,
                  (const aclTensor* self, const aclTensor* other, int mode, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  [&] {
                    if (mode < 0 || mode > 2)
                      fail(kErrParamInvalid, "mode must be 0, 1 or 2, got " + std::to_string(mode));
                    const bool integer = self != nullptr && is_integer(self->dtype);
                    return binary(
                        self, other, out,
                        [mode, integer](double a, double b) {
                          if (integer && b == 0) return 0.0;  // the device's integer division by zero
                          const double q = a / b;
                          return mode == 0 ? q : mode == 1 ? std::trunc(q) : std::floor(q);
                        },
                        kNumberTypes, kNumberTypes);
                  }())
static_assert(std::is_same_v<decltype(&aclnnDivModGetWorkspaceSize), oao::acl::DivModPrepare>);

namespace {

// The pages' types for aclnnRemainderTensorTensor and aclnnFmodTensor on A2/A3, less DOUBLE (and
// INT16), which this emulator's element readers do not hold.
constexpr std::initializer_list<aclDataType> kRemainderTypes = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT32,
                                                                ACL_INT64};

// out = self - floor(self / other) * other (floor: the divisor's sign) or, `truncated`, C's fmod (the
// dividend's sign). Integers exactly through int64; an integer divisor of 0 gives 0 here (the
// device's value is not on the pages).
Plan remainder(const aclTensor* self, const aclTensor* other, const aclTensor* out, bool truncated,
               std::initializer_list<aclDataType> types) {
  const bool integer = self != nullptr && is_integer(self->dtype);
  if (other != nullptr && self != nullptr && other->dtype != self->dtype) {
    fail(kErrParamInvalid,
         "other dtype " + dtype_name(other->dtype) + " is not self's " + dtype_name(self->dtype));
  }
  return binary(
      self, other, out,
      [integer, truncated](double a, double b) {
        if (integer) {
          const auto x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
          if (y == 0) return 0.0;
          int64_t r = x % y;
          if (!truncated && r != 0 && ((r < 0) != (y < 0))) r += y;
          return static_cast<double>(r);
        }
        if (truncated) return std::fmod(a, b);
        const double r = a - std::floor(a / b) * b;
        return r;
      },
      types, types);
}

constexpr double kSqrtTwoOverPi = 0.7978845608028654;

}  // namespace

#define ACLEMU_REMAINDER(name, truncated)                                                 \
  ACLEMU_TWO_PHASES(name,                                                                 \
                    (const aclTensor* self, const aclTensor* other, const aclTensor* out, \
                     uint64_t* workspaceSize, aclOpExecutor** executor),                  \
                    remainder(self, other, out, truncated, kRemainderTypes))              \
  static_assert(std::is_same_v<decltype(&name##GetWorkspaceSize), oao::acl::BinaryPrepare>);

ACLEMU_REMAINDER(aclnnRemainderTensorTensor, false)
ACLEMU_REMAINDER(aclnnFmodTensor, true)

ACLEMU_TWO_PHASES(aclnnGeluV2,
                  (const aclTensor* x, int64_t approximate, const aclTensor* y, uint64_t* workspaceSize,
                   aclOpExecutor** executor),
                  [&] {
                    if (approximate != 0 && approximate != 1) {
                      fail(kErrParamInvalid,
                           "approximate must be 0 (none) or 1 (tanh), got " + std::to_string(approximate));
                    }
                    return unary(
                        x, y,
                        [approximate](double v) {
                          if (approximate == 0) return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
                          return 0.5 * v * (1.0 + std::tanh(kSqrtTwoOverPi * (v + 0.044715 * v * v * v)));
                        },
                        kFloatTypes);
                  }())
static_assert(std::is_same_v<decltype(&aclnnGeluV2GetWorkspaceSize), oao::acl::GeluV2Prepare>);

ACLEMU_TWO_PHASES(aclnnMuls,
                  (const aclTensor* self, const aclScalar* other, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  [&] {
                    const double factor = need_scalar(other, "other").value;
                    return unary(self, out, [factor](double v) { return v * factor; }, kNumberTypes);
                  }())
static_assert(std::is_same_v<decltype(&aclnnMulsGetWorkspaceSize), oao::acl::MulsPrepare>);
ACLEMU_TWO_PHASES(aclnnLogicalNot,
                  (const aclTensor* self, const aclTensor* out, uint64_t* workspaceSize,
                   aclOpExecutor** executor),
                  unary(self, out, [](double a) { return double(a == 0); }, kAllTypes, false))
static_assert(std::is_same_v<decltype(&aclnnLogicalNotGetWorkspaceSize), oao::acl::UnaryPrepare>);

ACLEMU_UNARY(aclnnNeg, kNumberTypes, [](double a) { return -a; })
ACLEMU_UNARY(aclnnAbs, kNumberTypes, [](double a) { return std::fabs(a); })
ACLEMU_UNARY(aclnnExp, kFloatTypes, [](double a) { return std::exp(static_cast<float>(a)); })
ACLEMU_UNARY(aclnnLog, kFloatTypes, [](double a) { return std::log(static_cast<float>(a)); })
ACLEMU_UNARY(aclnnSqrt, kFloatTypes, [](double a) { return std::sqrt(a); })
ACLEMU_UNARY(aclnnReciprocal, kFloatTypes, [](double a) { return 1.0 / a; })
ACLEMU_UNARY(aclnnSigmoid, kFloatTypes, [](double a) { return 1.0 / (1.0 + std::exp(-a)); })
ACLEMU_UNARY(aclnnTanh, kFloatTypes, [](double a) { return std::tanh(a); })
ACLEMU_UNARY(aclnnSin, kFloatTypes, [](double a) { return std::sin(a); })
ACLEMU_UNARY(aclnnCos, kFloatTypes, [](double a) { return std::cos(a); })
ACLEMU_UNARY(aclnnRelu, kFloatTypes, [](double a) { return a > 0 ? a : 0.0; })
ACLEMU_UNARY(aclnnErf, kFloatTypes, [](double a) { return std::erf(a); })
ACLEMU_UNARY(aclnnFloor, kFloatTypes, [](double a) { return std::floor(a); })
ACLEMU_UNARY(aclnnCeil, kFloatTypes, [](double a) { return std::ceil(a); })

ACLEMU_TWO_PHASES(aclnnSWhere,
                  (const aclTensor* condition, const aclTensor* self, const aclTensor* other,
                   const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor),
                  [&] {
                    const aclTensor& c = need(condition, "condition");
                    check_dtype(c, "condition", {ACL_BOOL, ACL_UINT8});
                    const aclTensor& s = need(self, "self");
                    const aclTensor& o = need(other, "other");
                    check_same_dtype(o, "other", s, "self");
                    check_dtype(s, "self", kAllTypes);
                    const aclTensor& y = need(out, "out");
                    check_same_dtype(y, "out", s, "self");
                    const std::vector<int64_t> values = broadcast_shape(s, "self", o, "other");
                    aclTensor shaped = s;
                    shaped.dims = values;
                    const std::vector<int64_t> shape =
                        broadcast_shape(c, "condition", shaped, "self and other");
                    check_out_shape(y, "out", shape);
                    auto compute = [condition, self, other, out, shape] {
                      const std::vector<double> cv = read(*condition), sv = read(*self), ov = read(*other);
                      const auto ic = broadcast_index(shape, condition->dims),
                                 is = broadcast_index(shape, self->dims),
                                 io = broadcast_index(shape, other->dims);
                      std::vector<double> r(ic.size());
                      for (size_t i = 0; i < r.size(); ++i) r[i] = cv[ic[i]] != 0 ? sv[is[i]] : ov[io[i]];
                      write(*out, r);
                    };
                    return Plan{{condition, self, other}, {out}, compute};
                  }())
static_assert(std::is_same_v<decltype(&aclnnSWhereGetWorkspaceSize), oao::acl::WherePrepare>);

ACLEMU_TWO_PHASES(aclnnCast,
                  (const aclTensor* self, aclDataType dtype, const aclTensor* out, uint64_t* workspaceSize,
                   aclOpExecutor** executor),
                  [&] {
                    const aclTensor& x = need(self, "self");
                    const aclTensor& y = need(out, "out");
                    check_dtype(x, "self", kAllTypes);
                    check_dtype(y, "out", kAllTypes);
                    if (y.dtype != dtype) {
                      fail(kErrParamInvalid,
                           "dtype " + dtype_name(dtype) + " is not out's " + dtype_name(y.dtype));
                    }
                    check_out_shape(y, "out", x.dims);
                    auto compute = [self, out] {
                      std::vector<double> v = read(*self);
                      if (is_integer(out->dtype) && out->dtype != ACL_BOOL) {
                        for (double& e : v) e = std::trunc(e);
                      }
                      write(*out, v);
                    };
                    return Plan{{self}, {out}, compute};
                  }())
static_assert(std::is_same_v<decltype(&aclnnCastGetWorkspaceSize), oao::acl::CastPrepare>);
