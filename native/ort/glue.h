// What every ONNX Runtime kernel wrapper needs: type mapping to the kernels' storage types, the
// intra-op thread pool as a Parallel, and errors that name the op, the input and the rule.
#pragma once

#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>
#undef ORT_API_MANUAL_INIT

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/element.h"
#include "kernels/parallel.h"
#include "ort/ep.h"

namespace oao {

using Shape = std::vector<int64_t>;
using OpList = std::vector<std::shared_ptr<OrtCustomOp>>;

// ORT's element types -> the kernels' layout-compatible storage types.
template <class T>
struct storage {
  using type = T;
};
template <>
struct storage<Ort::Float16_t> {
  using type = half;
};
template <>
struct storage<Ort::BFloat16_t> {
  using type = bfloat16;
};
template <class T>
using storage_t = typename storage<T>::type;
static_assert(sizeof(half) == sizeof(Ort::Float16_t) && sizeof(bfloat16) == sizeof(Ort::BFloat16_t));

template <class T>
constexpr ONNXTensorElementDataType element_type() {
  if constexpr (std::is_same_v<T, float>) return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  if constexpr (std::is_same_v<T, Ort::Float16_t>) return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
  if constexpr (std::is_same_v<T, Ort::BFloat16_t>) return ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
  if constexpr (std::is_same_v<T, int32_t>) return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
  if constexpr (std::is_same_v<T, int64_t>) return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
}

template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float32";
  if constexpr (std::is_same_v<T, Ort::Float16_t>) return "float16";
  if constexpr (std::is_same_v<T, Ort::BFloat16_t>) return "bfloat16";
  if constexpr (std::is_same_v<T, int32_t>) return "int32";
  if constexpr (std::is_same_v<T, int64_t>) return "int64";
}

inline std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}

// The product of s[begin, end). ORT's tensors never overflow it as a whole, but a sub-range can
// (a shape [0, 2^40, 2^40] is a valid empty tensor): that is an error, not a wrapped count.
inline int64_t element_count(const Shape& s, size_t begin = 0, size_t end = SIZE_MAX) {
  end = std::min(end, s.size());
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) {
    if (__builtin_mul_overflow(n, s[i], &n)) {
      throw Ort::Exception("shape " + shape_str(s) + " has more elements than int64 can count",
                           ORT_INVALID_ARGUMENT);
    }
  }
  return n;
}

// `text` between single quotes, each byte outside printable ASCII written as \xNN: an attribute
// may hold a NUL, which would end the C string of an error message there.
inline std::string quoted(const std::string& text) {
  std::string out = "'";
  for (const unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out + "'";
}

// "" when `value` is one of an attribute's `choices` (schema::<Op>::k<Attribute>Choices), else the
// error: "attribute 'sparse_mode' is 1; it must be 0 or 3".
template <class Value, class Choice, size_t N>
std::string choice_error(const char* name, const Value& value, const Choice (&choices)[N]) {
  const auto spelled = [](const auto& v) {
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(v)>>) {
      return std::to_string(v);
    } else {
      return quoted(v);
    }
  };
  std::string allowed;
  for (size_t i = 0; i < N; ++i) {
    if (value == choices[i]) return "";
    allowed += (i == 0 ? "" : i + 1 < N ? ", " : " or ") + spelled(choices[i]);
  }
  return std::string("attribute '") + name + "' is " + spelled(value) + "; it must be " + allowed;
}

// An INVALID_ARGUMENT status whose message starts with the op's name.
inline Ort::Status op_error(const char* op, const std::string& message) {
  return Ort::Status((std::string(op) + ": " + message).c_str(), ORT_INVALID_ARGUMENT);
}

// The session's intra-op pool. When ORT cannot schedule the work, Parallel::for_each runs what its
// calls did not on the calling thread.
inline Parallel parallel_of(OrtKernelContext* ctx) {
  Parallel p;
  p.owner = ctx;
  p.run = [](void* owner, Parallel::Task task, size_t total, void* data) {
    OrtStatus* status =
        Ort::GetApi().KernelContext_ParallelFor(static_cast<OrtKernelContext*>(owner), task, total, 0, data);
    if (status == nullptr) return true;
    Ort::GetApi().ReleaseStatus(status);
    return false;
  };
  return p;
}

// Runs a kernel body, turning any C++ exception (an allocation failure, say) into an ORT error
// instead of letting it cross the C boundary.
template <class F>
Ort::Status guarded(const char* op, F&& body) noexcept {
  try {
    return body();
  } catch (const Ort::Exception& e) {
    return Ort::Status((std::string(op) + ": " + e.what()).c_str(), e.GetOrtErrorCode());
  } catch (const std::exception& e) {
    return Ort::Status((std::string(op) + ": " + e.what()).c_str(), ORT_FAIL);
  }
}

// Whether the node has attribute `name` as a float, int, string or list of floats or ints (ORT's
// getters fail alike for an absent attribute and for one of another type).
inline bool has_attribute(const OrtKernelInfo* info, const char* name) {
  const OrtApi& api = Ort::GetApi();
  const auto found = [&](OrtStatus* status) {
    if (status == nullptr) return true;
    api.ReleaseStatus(status);
    return false;
  };
  float f;
  int64_t i;
  size_t size = 0;
  // One getter at a time: each failure's status is released before the next is asked.
  return found(api.KernelInfoGetAttribute_float(info, name, &f)) ||
         found(api.KernelInfoGetAttribute_int64(info, name, &i)) ||
         found(api.KernelInfoGetAttribute_string(info, name, nullptr, &size)) ||
         found(api.KernelInfoGetAttributeArray_float(info, name, nullptr, &size)) ||
         found(api.KernelInfoGetAttributeArray_int64(info, name, nullptr, &size));
}

// An attribute the node may leave out: ORT leaves custom ops' defaults to the kernel. One of
// another type is an error, not the default (ORT does not check custom ops' attributes).
template <class T>
std::optional<T> attribute(const OrtKernelInfo* info, const char* name) {
  const OrtApi& api = Ort::GetApi();
  T value{};
  OrtStatus* status = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    status = api.KernelInfoGetAttribute_float(info, name, &value);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    status = api.KernelInfoGetAttribute_int64(info, name, &value);
  } else {
    static_assert(std::is_same_v<T, std::string>);
    size_t size = 0;  // the first call asks for the size, NUL included
    status = api.KernelInfoGetAttribute_string(info, name, nullptr, &size);
    if (status == nullptr) {
      value.resize(size);
      status = api.KernelInfoGetAttribute_string(info, name, value.data(), &size);
      value.resize(size > 0 ? size - 1 : 0);
    }
  }
  if (status == nullptr) return value;
  api.ReleaseStatus(status);
  if (has_attribute(info, name)) {
    const char* kind = std::is_same_v<T, float>     ? "a float"
                       : std::is_same_v<T, int64_t> ? "an int"
                                                    : "a string";
    throw Ort::Exception(std::string("attribute '") + name + "' must be " + kind, ORT_INVALID_ARGUMENT);
  }
  return std::nullopt;
}

}  // namespace oao
