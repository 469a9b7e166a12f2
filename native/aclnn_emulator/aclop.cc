// libacl_op_compiler.so: aclopCompileAndExecute for the op types, inputs and attributes that ONNX
// Runtime 1.24's CANN execution provider sends for its own kernels of standard ONNX ops:
//   Add Sub Mul Div  (math/binary_elementwise_ops.cc: inputs already broadcast by BroadcastToD)
//   BroadcastToD     (cann_utils.cc Broadcast: attr "shape")
//   BatchMatMul      (math/matmul.cc: attrs "adj_x1", "adj_x2"; ONNX MatMul shapes, 1-D included)
//   Relu             (activation/activations.cc)
//   Flatten          (tensor/flatten.cc: attr "axis", as ONNX gives it)
//   Log              (math/unary_elementwise_ops.cc: attrs "base", "scale", "shift")
//   Neg Sin Cos      (math/unary_elementwise_ops.cc: no attributes)
//   Cast             (tensor/cast.cc: attr "dst_type")
// Identity, Reshape, and Dropout outside training, copy with aclrtMemcpyAsync instead. A call
// checks its arguments now and queues the computation on the stream, which runs it when the host
// waits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "acl_objects.h"
#include "elements.h"
#include "op.h"
#include "tensor.h"

extern "C" {
typedef enum aclEngineType { ACL_ENGINE_SYS, ACL_ENGINE_AICORE, ACL_ENGINE_VECTOR } aclopEngineType;
typedef enum aclCompileType { ACL_COMPILE_SYS, ACL_COMPILE_UNREGISTERED } aclopCompileType;
}

namespace {

using namespace aclemu;
using namespace aclemu::acl_error;

// One input or output as the queued work sees it: the descs and buffers are gone by then.
struct Operand {
  aclDataType dtype;
  std::vector<int64_t> dims;
  void* data;
  size_t bytes;  // what the desc describes, at most the buffer's size
};

struct Call {
  std::string type;
  std::vector<Operand> in, out;
  std::map<std::string, AttrValue> attrs;
};

using Run = std::function<void()>;

// Element types by how they compute: floats narrower than float32 in float32, rounded once per
// element on the way back; integers in int64, wrapping to their width.
struct Half {
  uint16_t bits;
};
struct BHalf {
  uint16_t bits;
};
template <class T>
struct Tag {
  using type = T;
};
template <class T>
using Compute = std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<std::is_same_v<T, double>, double, float>>;

template <class T>
Compute<T> load(const void* base, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const T*>(base) + i, sizeof v);
  if constexpr (std::is_same_v<T, Half>) return f16_to_float(v.bits);
  else if constexpr (std::is_same_v<T, BHalf>) return bf16_to_float(v.bits);
  else return static_cast<Compute<T>>(v);
}

template <class T>
void store(void* base, int64_t i, Compute<T> c) {
  T v;
  if constexpr (std::is_same_v<T, Half>) v.bits = float_to_f16(c);
  else if constexpr (std::is_same_v<T, BHalf>) v.bits = float_to_bf16(c);
  else v = static_cast<T>(c);  // integers keep their low bits, as the device's do
  std::memcpy(static_cast<T*>(base) + i, &v, sizeof v);
}

// The aclDataType of each C++ element type by_dtype dispatches on.
template <class T>
constexpr aclDataType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return ACL_FLOAT;
  else if constexpr (std::is_same_v<T, Half>) return ACL_FLOAT16;
  else if constexpr (std::is_same_v<T, BHalf>) return ACL_BF16;
  else if constexpr (std::is_same_v<T, double>) return ACL_DOUBLE;
  else if constexpr (std::is_same_v<T, int8_t>) return ACL_INT8;
  else if constexpr (std::is_same_v<T, uint8_t>) return ACL_UINT8;
  else if constexpr (std::is_same_v<T, int16_t>) return ACL_INT16;
  else if constexpr (std::is_same_v<T, uint16_t>) return ACL_UINT16;
  else if constexpr (std::is_same_v<T, int32_t>) return ACL_INT32;
  else {
    static_assert(std::is_same_v<T, int64_t>);
    return ACL_INT64;
  }
}

// The element types an op admits, in the order its error message lists them.
template <class... Ts>
struct Types {};

// Calls f(Tag<T>{}) for the C++ type T of x's dtype, one of `allowed`. f is instantiated for the
// allowed types only (a switch over every dtype would compile each op's loops for types it
// refuses, most of this file's build time for nothing).
template <class... Ts, class F>
Run by_dtype(const Operand& x, const char* name, Types<Ts...> /*allowed*/, F f) {
  Run run;
  const bool found = ((x.dtype == dtype_of<Ts>() && (run = f(Tag<Ts>{}), true)) || ...);
  if (!found) {
    std::string list;
    for (aclDataType d : {dtype_of<Ts>()...}) list += (list.empty() ? "" : ", ") + dtype_name(d);
    fail(kUnsupportedDataType,
       std::string(name) + " dtype " + dtype_name(x.dtype) + " not supported (" + list + ")");
  }
  return run;
}

void check_same_dtype(const Operand& x, const char* name, const Operand& ref) {
  if (x.dtype != ref.dtype)
    fail(kUnsupportedDataType, std::string(name) + " dtype " + dtype_name(x.dtype) + " differs from input 0's " +
                                   dtype_name(ref.dtype));
}

void check_dims(const Operand& x, const char* name, const std::vector<int64_t>& want, const std::string& rule) {
  if (x.dims != want)
    fail(kOpOutputNotMatch, std::string(name) + " shape " + shape_text(x.dims) + " must be " + shape_text(want) +
                                " (" + rule + ")");
}

// Attributes: only the names an op declares, each of its declared type.
void allow_attrs(const Call& call, std::initializer_list<const char*> names) {
  for (const auto& [name, value] : call.attrs) {
    bool known = false;
    for (const char* n : names) known = known || name == n;
    if (!known) fail(kOpAttrNotMatch, call.type + " has no attribute \"" + name + "\"");
  }
}

template <class T>
T attr(const Call& call, const char* name, const char* type_name, const T* fallback) {
  auto it = call.attrs.find(name);
  if (it == call.attrs.end()) {
    if (fallback == nullptr) fail(kOpAttrNotMatch, call.type + " needs attribute \"" + name + "\"");
    return *fallback;
  }
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  fail(kOpAttrNotMatch, call.type + " attribute \"" + name + "\" must be " + type_name);
}

// numpy broadcasting: dims align at the right, and a dim of 1 stretches.
std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()));
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1, db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1)
      fail(kOpInputNotMatch, "shapes " + shape_text(a) + " and " + shape_text(b) + " do not broadcast");
    out[out.size() - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

// For each element of `out` in row-major order, the offset of the element of `in` it reads.
std::vector<int64_t> broadcast_offsets(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  const size_t shift = out.size() - in.size();
  std::vector<int64_t> stride(out.size(), 0);
  for (int64_t k = static_cast<int64_t>(in.size()) - 1, s = 1; k >= 0; s *= in[k], --k)
    stride[shift + k] = in[k] == 1 ? 0 : s;
  std::vector<int64_t> offsets(static_cast<size_t>(numel(out)));
  std::vector<int64_t> index(out.size(), 0);
  int64_t offset = 0;
  for (int64_t& o : offsets) {
    o = offset;
    for (size_t k = out.size(); k-- > 0;) {
      offset += stride[k];
      if (++index[k] < out[k]) break;
      offset -= stride[k] * out[k];
      index[k] = 0;
    }
  }
  return offsets;
}

// Operand counts are checked before any op looks at an operand.
void check_arity(const Call& call, size_t inputs, size_t outputs) {
  if (call.in.size() != inputs)
    fail(kOpInputNotMatch, call.type + " takes " + std::to_string(inputs) + " inputs, got " + std::to_string(call.in.size()));
  if (call.out.size() != outputs) {
    fail(kOpOutputNotMatch,
         call.type + " takes " + std::to_string(outputs) + " outputs, got " + std::to_string(call.out.size()));
  }
}

enum class Arith { kAdd, kSub, kMul, kDiv };

template <class C>
C apply(Arith op, C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    // In uint64 so that overflow wraps instead of being undefined.
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    switch (op) {
      case Arith::kAdd: return static_cast<C>(ua + ub);
      case Arith::kSub: return static_cast<C>(ua - ub);
      case Arith::kMul: return static_cast<C>(ua * ub);
      case Arith::kDiv: break;
    }
    if (b == 0) fail(kInvalidParam, "Div: integer division by zero");
    if (b == -1) return static_cast<C>(0 - ua);  // INT64_MIN / -1 wraps
    return a / b;                                 // truncates, as ONNX Div does
  } else {
    switch (op) {
      case Arith::kAdd: return a + b;
      case Arith::kSub: return a - b;
      case Arith::kMul: return a * b;
      case Arith::kDiv: break;
    }
    return a / b;
  }
}

Run binary(const Call& call) {
  check_arity(call, 2, 1);
  allow_attrs(call, {});
  const Operand &a = call.in[0], &b = call.in[1], &y = call.out[0];
  check_same_dtype(b, "input 1", a);
  check_same_dtype(y, "output 0", a);
  check_dims(y, "output 0", broadcast_dims(a.dims, b.dims), "the inputs' broadcast shape");
  const Arith op = call.type == "Add" ? Arith::kAdd : call.type == "Sub" ? Arith::kSub
                    : call.type == "Mul" ? Arith::kMul : Arith::kDiv;
  return by_dtype(a, "input 0", Types<int8_t, uint8_t, int16_t, uint16_t, int32_t, int64_t, Half, float, double>{},
                  [&](auto tag) -> Run {
                    using T = typename decltype(tag)::type;
                    return [op, a, b, y] {
                      const std::vector<int64_t> ia = broadcast_offsets(a.dims, y.dims), ib = broadcast_offsets(b.dims, y.dims);
                      for (size_t i = 0; i < ia.size(); ++i)
                        store<T>(y.data, i, apply(op, load<T>(a.data, ia[i]), load<T>(b.data, ib[i])));
                    };
                  });
}

// A byte-for-byte copy of each element: any dtype works.
Run broadcast_to(const Call& call) {
  check_arity(call, 1, 1);
  allow_attrs(call, {"shape"});
  const Operand &x = call.in[0], &y = call.out[0];
  const auto shape = attr<std::vector<int64_t>>(call, "shape", "a list of ints", nullptr);
  check_same_dtype(y, "output 0", x);
  if (broadcast_dims(x.dims, shape) != shape)
    fail(kOpInputNotMatch, "input 0 shape " + shape_text(x.dims) + " does not broadcast to shape " + shape_text(shape));
  check_dims(y, "output 0", shape, "attribute \"shape\"");
  return [x, y] {
    const size_t size = element_size(x.dtype);
    const std::vector<int64_t> from = broadcast_offsets(x.dims, y.dims);
    for (size_t i = 0; i < from.size(); ++i)
      std::memcpy(static_cast<char*>(y.data) + i * size, static_cast<const char*>(x.data) + from[i] * size, size);
  };
}

Run relu(const Call& call) {
  check_arity(call, 1, 1);
  allow_attrs(call, {});
  const Operand &x = call.in[0], &y = call.out[0];
  check_same_dtype(y, "output 0", x);
  check_dims(y, "output 0", x.dims, "input 0's shape");
  return by_dtype(x, "input 0", Types<int8_t, int16_t, int32_t, int64_t, Half, float, double>{},
                  [&](auto tag) -> Run {
                    using T = typename decltype(tag)::type;
                    return [x, y] {
                      for (int64_t i = 0; i < numel(x.dims); ++i) {
                        const Compute<T> v = load<T>(x.data, i);
                        store<T>(y.data, i, v < 0 ? Compute<T>(0) : v);  // NaN stays NaN
                      }
                    };
                  });
}

// y = f(x) elementwise over the types `Ts` (narrow floats computed in float32).
template <typename... Ts, typename F>
Run unary(const Call& call, Types<Ts...> types, F f) {
  check_arity(call, 1, 1);
  allow_attrs(call, {});
  const Operand &x = call.in[0], &y = call.out[0];
  check_same_dtype(y, "output 0", x);
  check_dims(y, "output 0", x.dims, "input 0's shape");
  return by_dtype(x, "input 0", types, [&](auto tag) -> Run {
    using T = typename decltype(tag)::type;
    return [x, y, f] {
      for (int64_t i = 0; i < numel(x.dims); ++i) store<T>(y.data, i, f(load<T>(x.data, i)));
    };
  });
}

Run negate(const Call& call) {
  return unary(call, Types<int8_t, int16_t, int32_t, int64_t, Half, BHalf, float, double>{},
               [](auto v) { return -v; });
}
Run sine(const Call& call) {
  return unary(call, Types<Half, BHalf, float, double>{}, [](auto v) { return std::sin(v); });
}
Run cosine(const Call& call) {
  return unary(call, Types<Half, BHalf, float, double>{}, [](auto v) { return std::cos(v); });
}

Run flatten(const Call& call) {
  check_arity(call, 1, 1);
  allow_attrs(call, {"axis"});
  const Operand &x = call.in[0], &y = call.out[0];
  constexpr int64_t kDefaultAxis = 1;
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t axis = attr<int64_t>(call, "axis", "an int", &kDefaultAxis);
  if (axis < -rank || axis > rank)
    fail(kOpAttrNotMatch, "Flatten attribute \"axis\" " + std::to_string(axis) + " outside [-rank, rank] for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  check_same_dtype(y, "output 0", x);
  check_dims(y, "output 0",
             {numel({x.dims.begin(), x.dims.begin() + axis}), numel({x.dims.begin() + axis, x.dims.end()})},
             "input 0 flattened at axis " + std::to_string(axis));
  return [x, y] { std::memmove(y.data, x.data, x.bytes); };
}

// ONNX MatMul: a 1-D operand gains a unit axis for the product and loses it in the result; the
// leading axes broadcast. adj_x1 / adj_x2 transpose the last two axes of A / B.
Run batch_matmul(const Call& call) {
  check_arity(call, 2, 1);
  allow_attrs(call, {"adj_x1", "adj_x2"});
  constexpr bool kNo = false;
  const bool adj_a = attr<bool>(call, "adj_x1", "a bool", &kNo), adj_b = attr<bool>(call, "adj_x2", "a bool", &kNo);
  const Operand &a = call.in[0], &b = call.in[1], &y = call.out[0];
  check_same_dtype(b, "input 1", a);
  check_same_dtype(y, "output 0", a);
  if (a.dims.empty() || b.dims.empty()) fail(kOpInputNotMatch, "BatchMatMul inputs need at least one axis");
  if ((adj_a && a.dims.size() == 1) || (adj_b && b.dims.size() == 1))
    fail(kOpAttrNotMatch, "BatchMatMul cannot transpose a 1-D input");
  const std::vector<int64_t> da = a.dims.size() == 1 ? std::vector<int64_t>{1, a.dims[0]} : a.dims;
  const std::vector<int64_t> db = b.dims.size() == 1 ? std::vector<int64_t>{b.dims[0], 1} : b.dims;
  const int64_t m = da[da.size() - (adj_a ? 1 : 2)], k = da[da.size() - (adj_a ? 2 : 1)];
  const int64_t kb = db[db.size() - (adj_b ? 1 : 2)], n = db[db.size() - (adj_b ? 2 : 1)];
  if (k != kb) {
    fail(kOpInputNotMatch, "BatchMatMul inner dims differ: " + shape_text(a.dims) + " x " + shape_text(b.dims) +
                               " (adj_x1 " + std::to_string(adj_a) + ", adj_x2 " + std::to_string(adj_b) + ")");
  }
  const std::vector<int64_t> batch_a(da.begin(), da.end() - 2), batch_b(db.begin(), db.end() - 2);
  const std::vector<int64_t> batch = broadcast_dims(batch_a, batch_b);
  std::vector<int64_t> want = batch;
  if (a.dims.size() > 1) want.push_back(m);
  if (b.dims.size() > 1) want.push_back(n);
  check_dims(y, "output 0", want, "ONNX MatMul of the inputs");
  return by_dtype(a, "input 0", Types<Half, BHalf, float, int32_t>{}, [&](auto tag) -> Run {
    using T = typename decltype(tag)::type;
    return [=] {
      const std::vector<int64_t> pa = broadcast_offsets(batch_a, batch), pb = broadcast_offsets(batch_b, batch);
      // Element (i, j) of a matrix stored [rows, cols], or transposed.
      const auto at_a = [&](int64_t base, int64_t i, int64_t j) { return base + (adj_a ? j * m + i : i * k + j); };
      const auto at_b = [&](int64_t base, int64_t i, int64_t j) { return base + (adj_b ? j * k + i : i * n + j); };
      for (size_t p = 0; p < pa.size(); ++p) {
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            Compute<T> sum = 0;  // the cube unit accumulates narrow floats in float32
            for (int64_t q = 0; q < k; ++q) {
              const Compute<T> product =
                  apply(Arith::kMul, load<T>(a.data, at_a(pa[p] * m * k, i, q)), load<T>(b.data, at_b(pb[p] * k * n, q, j)));
              sum = apply(Arith::kAdd, sum, product);
            }
            store<T>(y.data, (static_cast<int64_t>(p) * m + i) * n + j, sum);
          }
        }
      }
    };
  });
}

// y = log_base(scale * x + shift), base -1 meaning e: CANN's Log, which the EP sends with
// base -1, scale 1, shift 0 (math/unary_elementwise_ops.cc). Any other base must be positive.
Run logarithm(const Call& call) {
  check_arity(call, 1, 1);
  allow_attrs(call, {"base", "scale", "shift"});
  constexpr float kE = -1.0f, kOne = 1.0f, kZero = 0.0f;
  const float base = attr<float>(call, "base", "a float", &kE);
  const float scale = attr<float>(call, "scale", "a float", &kOne);
  const float shift = attr<float>(call, "shift", "a float", &kZero);
  if (base != -1.0f && !(base > 0.0f && base != 1.0f))
    fail(kOpAttrNotMatch,
         "Log attribute \"base\" " + std::to_string(base) + " must be -1 (e) or positive and not 1");
  const Operand &x = call.in[0], &y = call.out[0];
  check_same_dtype(y, "output 0", x);
  check_dims(y, "output 0", x.dims, "input 0's shape");
  return by_dtype(x, "input 0", Types<Half, BHalf, float, double>{}, [&](auto tag) -> Run {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    return [=] {
      const C divisor = base == -1.0f ? C(1) : std::log(C(base));
      for (int64_t i = 0; i < numel(x.dims); ++i) {
        const C ln = std::log(C(scale) * load<T>(x.data, i) + C(shift));
        store<T>(y.data, i, base == -1.0f ? ln : ln / divisor);
      }
    };
  });
}

// Cast reads every element exactly as a long double (64-bit significand: every integer up to 64
// bits and every float are exact) and rounds once to the destination, as numpy's astype does.
static_assert(std::numeric_limits<long double>::digits >= 64, "Cast needs integers up to 64 bits exact");

// The EP registers all but BF16, as source and as destination.
constexpr aclDataType kCastTypes[] = {ACL_BOOL,  ACL_UINT8, ACL_UINT16,  ACL_UINT32, ACL_UINT64,
                                      ACL_INT8,  ACL_INT16, ACL_INT32,   ACL_INT64,  ACL_FLOAT16,
                                      ACL_BF16,  ACL_FLOAT, ACL_DOUBLE};

template <class T>
T read_as(const void* base, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const T*>(base) + i, sizeof v);
  return v;
}

long double cast_load(aclDataType dtype, const void* base, int64_t i) {
  switch (dtype) {
    case ACL_BOOL: return read_as<uint8_t>(base, i) != 0 ? 1.0L : 0.0L;
    case ACL_UINT8: return read_as<uint8_t>(base, i);
    case ACL_UINT16: return read_as<uint16_t>(base, i);
    case ACL_UINT32: return read_as<uint32_t>(base, i);
    case ACL_UINT64: return read_as<uint64_t>(base, i);
    case ACL_INT8: return read_as<int8_t>(base, i);
    case ACL_INT16: return read_as<int16_t>(base, i);
    case ACL_INT32: return read_as<int32_t>(base, i);
    case ACL_INT64: return read_as<int64_t>(base, i);
    case ACL_FLOAT16: return f16_to_float(read_as<uint16_t>(base, i));
    case ACL_BF16: return bf16_to_float(read_as<uint16_t>(base, i));
    case ACL_FLOAT: return read_as<float>(base, i);
    default: return read_as<double>(base, i);  // ACL_DOUBLE: the plan admits nothing else
  }
}

// Rounds to float with ties to odd (truncate, then set the last bit when inexact): rounding that
// float on to float16 or bfloat16 (at least 2 bits narrower) then equals one rounding of v.
float round_to_odd_float(long double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<long double>(f) == v) return f;
  if (std::fabs(static_cast<long double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return bits_float(float_bits(f) | 1u);
}

template <class T>
void write_as(void* base, int64_t i, T v) {
  std::memcpy(static_cast<T*>(base) + i, &v, sizeof v);
}

bool is_float_type(aclDataType d) {
  return d == ACL_FLOAT16 || d == ACL_BF16 || d == ACL_FLOAT || d == ACL_DOUBLE;
}

// Integers wrap to the destination's width as numpy's do; a float must truncate to a value the
// destination holds (NaN, infinities and values outside its range are not emulated: the device's
// saturation is unknown here, and numpy's result depends on the platform).
void cast_store(aclDataType to, void* base, int64_t i, long double v, bool from_float) {
  switch (to) {
    case ACL_BOOL: return write_as<uint8_t>(base, i, v != 0 ? 1 : 0);  // NaN is true, as in numpy
    case ACL_FLOAT16: return write_as<uint16_t>(base, i, float_to_f16(round_to_odd_float(v)));
    case ACL_BF16: return write_as<uint16_t>(base, i, float_to_bf16(round_to_odd_float(v)));
    case ACL_FLOAT: return write_as<float>(base, i, static_cast<float>(v));
    case ACL_DOUBLE: return write_as<double>(base, i, static_cast<double>(v));
    default: break;
  }
  const size_t bits = 8 * element_size(to);
  const bool is_signed = to == ACL_INT8 || to == ACL_INT16 || to == ACL_INT32 || to == ACL_INT64;
  if (from_float) {
    const long double t = std::trunc(v);
    const long double lo = is_signed ? -std::ldexp(1.0L, bits - 1) : 0.0L;
    const long double hi = std::ldexp(1.0L, is_signed ? bits - 1 : bits);  // exclusive
    if (!(t >= lo && t < hi)) {
      fail(kInvalidParam, "Cast of " + std::to_string(static_cast<double>(v)) + " to " + dtype_name(to) +
                              ": NaN, infinities and values outside the destination's range are not "
                              "emulated");
    }
    v = t;
  }
  // Exact integer: its two's-complement bits modulo 2^64, then the low bits of the destination.
  const uint64_t u = v < 0 ? static_cast<uint64_t>(static_cast<int64_t>(v)) : static_cast<uint64_t>(v);
  switch (to) {
    case ACL_UINT8: return write_as<uint8_t>(base, i, static_cast<uint8_t>(u));
    case ACL_UINT16: return write_as<uint16_t>(base, i, static_cast<uint16_t>(u));
    case ACL_UINT32: return write_as<uint32_t>(base, i, static_cast<uint32_t>(u));
    case ACL_UINT64: return write_as<uint64_t>(base, i, u);
    case ACL_INT8: return write_as<int8_t>(base, i, static_cast<int8_t>(u));
    case ACL_INT16: return write_as<int16_t>(base, i, static_cast<int16_t>(u));
    case ACL_INT32: return write_as<int32_t>(base, i, static_cast<int32_t>(u));
    default: return write_as<int64_t>(base, i, static_cast<int64_t>(u));
  }
}

bool cast_admits(aclDataType d) {
  return std::find(std::begin(kCastTypes), std::end(kCastTypes), d) != std::end(kCastTypes);
}

void check_cast_type(const Operand& x, const char* name) {
  if (cast_admits(x.dtype)) return;
  std::string list;
  for (aclDataType d : kCastTypes) list += (list.empty() ? "" : ", ") + dtype_name(d);
  fail(kUnsupportedDataType,
       std::string(name) + " dtype " + dtype_name(x.dtype) + " not supported (" + list + ")");
}

// tensor/cast.cc: attr "dst_type", the output's aclDataType.
Run cast(const Call& call) {
  check_arity(call, 1, 1);
  allow_attrs(call, {"dst_type"});
  const Operand &x = call.in[0], &y = call.out[0];
  const auto dst_type = attr<int64_t>(call, "dst_type", "an int", nullptr);
  check_cast_type(x, "input 0");
  if (dst_type != y.dtype) {
    fail(kOpAttrNotMatch, "Cast attribute \"dst_type\" " + std::to_string(dst_type) +
                              " differs from output 0's dtype " + dtype_name(y.dtype) + " (" +
                              std::to_string(static_cast<int>(y.dtype)) + ")");
  }
  check_cast_type(y, "output 0");
  check_dims(y, "output 0", x.dims, "input 0's shape");
  return [x, y] {
    const bool from_float = is_float_type(x.dtype);
    for (int64_t i = 0; i < numel(x.dims); ++i)
      cast_store(y.dtype, y.data, i, cast_load(x.dtype, x.data, i), from_float);
  };
}

struct OpType {
  const char* name;
  Run (*plan)(const Call&);
};

constexpr OpType kOpTypes[] = {
    {"Add", binary},   {"Sub", binary},     {"Mul", binary},         {"Div", binary},
    {"Relu", relu},    {"Flatten", flatten}, {"BroadcastToD", broadcast_to}, {"BatchMatMul", batch_matmul},
    {"Log", logarithm}, {"Cast", cast},      {"Neg", negate},          {"Sin", sine},
    {"Cos", cosine},
};

bool nd_family(aclFormat format) {
  return format == ACL_FORMAT_ND || format == ACL_FORMAT_NCHW || format == ACL_FORMAT_NHWC ||
         format == ACL_FORMAT_NCDHW;
}

std::vector<Operand> operands(int count, const aclTensorDesc* const descs[], const aclDataBuffer* const buffers[],
                              const char* side) {
  if (count < 0) fail(kInvalidParam, std::string("num") + side + "s " + std::to_string(count) + " is negative");
  if (count > 0 && (descs == nullptr || buffers == nullptr))
    fail(kInvalidParam, std::string(side) + "Desc or " + side + "s is NULL");
  std::vector<Operand> result;
  for (int i = 0; i < count; ++i) {
    const std::string name = std::string(side) + " " + std::to_string(i);
    const aclTensorDesc* desc = descs[i];
    const aclDataBuffer* buffer = buffers[i];
    if (!aclemu_acl_object_live(AclObject::kTensorDesc, desc)) fail(kInvalidParam, name + " desc is not a live aclTensorDesc");
    if (!aclemu_acl_object_live(AclObject::kDataBuffer, buffer))
      fail(kInvalidParam, name + " buffer is not a live aclDataBuffer");
    if (!nd_family(desc->format)) {
      fail(kFormatNotMatch, name + " format " + std::to_string(static_cast<int>(desc->format)) +
                                " is not emulated (ND, NCHW, NHWC or NCDHW)");
    }
    if (desc->is_const) fail(kOpInputNotMatch, name + " is constant (aclSetTensorConst): not emulated");
    const size_t bytes = static_cast<size_t>(numel(desc->dims)) * element_size(desc->dtype);
    if (buffer->size < bytes) {
      fail(kInvalidParam, name + " buffer holds " + std::to_string(buffer->size) + " bytes, its desc " +
                              shape_text(desc->dims) + " " + dtype_name(desc->dtype) + " needs " + std::to_string(bytes));
    }
    result.push_back(Operand{desc->dtype, desc->dims, buffer->data, bytes});
  }
  return result;
}

std::vector<Range> ranges(const std::vector<Operand>& operands) {
  std::vector<Range> result;
  for (const Operand& x : operands) result.push_back(Range{x.data, x.bytes});
  return result;
}

}  // namespace

ACLEMU_API aclError aclopCompileAndExecute(const char* opType, int numInputs, const aclTensorDesc* const inputDesc[],
                                           const aclDataBuffer* const inputs[], int numOutputs,
                                           const aclTensorDesc* const outputDesc[], aclDataBuffer* const outputs[],
                                           const aclopAttr* attr, aclopEngineType engineType,
                                           aclopCompileType compileFlag, const char* /*opPath: only for
                                           ACL_COMPILE_UNREGISTERED, which is refused*/,
                                           aclrtStream stream) {
  constexpr const char* kSymbol = "aclopCompileAndExecute";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  try {
    if (opType == nullptr) fail(kInvalidParam, "opType is NULL");
    if (engineType < ACL_ENGINE_SYS || engineType > ACL_ENGINE_VECTOR)
      fail(kInvalidParam, "engineType " + std::to_string(static_cast<int>(engineType)) + " is not an aclopEngineType");
    if (compileFlag != ACL_COMPILE_SYS)
      fail(kInvalidParam, "compileFlag must be ACL_COMPILE_SYS: operators outside CANN's library are not emulated");
    if (attr != nullptr && !aclemu_acl_object_live(AclObject::kOpAttr, attr)) fail(kInvalidParam, "attr is not a live aclopAttr");
    const OpType* op = nullptr;
    for (const OpType& t : kOpTypes) op = std::strcmp(t.name, opType) == 0 ? &t : op;
    if (op == nullptr) fail(kOpNotFound, std::string("op type ") + opType + " is not emulated");
    Call call{opType, operands(numInputs, inputDesc, inputs, "input"), operands(numOutputs, outputDesc, outputs, "output"),
              attr != nullptr ? attr->values : std::map<std::string, AttrValue>{}};
    Run run = op->plan(call);
    return hooks().enqueue(stream, Work{std::string(kSymbol) + " " + opType, ranges(call.in), ranges(call.out), std::move(run)});
  } catch (const Error& e) {
    hooks().set_error(std::string(kSymbol) + ": " + e.message);
    return e.code;
  }
}
