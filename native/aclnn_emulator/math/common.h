// libopapi_math.so: what the standard ops' emulated functions share. Values go through double
// (floats, whose device kernels compute in float32, round to it first) or int64 (integers, bools),
// by the tensor's element type, so that int64 indices stay exact.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "op.h"
#include "tensor.h"

namespace aclemu::math {

bool is_float(aclDataType dtype);
bool is_integer(aclDataType dtype);  // integers and bool

// Element types by family, as the vendor's tables list them for A2/A3.
inline constexpr std::initializer_list<aclDataType> kFloatTypes = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
inline constexpr std::initializer_list<aclDataType> kNumberTypes = {
    ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT32, ACL_INT64, ACL_INT8, ACL_UINT8};
inline constexpr std::initializer_list<aclDataType> kAllTypes = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16,  ACL_INT32,
                                                                 ACL_INT64, ACL_INT8,    ACL_UINT8, ACL_BOOL};

// A whole view in row-major order, through double; written back rounding to the element type
// (floats to nearest even, integers truncated toward zero, bools as value != 0).
std::vector<double> read(const aclTensor& t);
void write(const aclTensor& t, const std::vector<double>& values);

// The broadcast of two shapes (numpy's rule), or fail(561002) naming both tensors.
std::vector<int64_t> broadcast_shape(const aclTensor& a, const char* a_name, const aclTensor& b,
                                     const char* b_name);
// For each element of `out` (row-major), the row-major index of the element of a tensor of shape
// `in` that broadcasts to it.
std::vector<int64_t> broadcast_index(const std::vector<int64_t>& out, const std::vector<int64_t>& in);

// Row-major strides of a contiguous shape.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);

// The vendor's rule that an output's shape is what the op computes (561002).
void check_out_shape(const aclTensor& out, const char* name, const std::vector<int64_t>& want);

// A required host aclIntArray (161001 when NULL; its values).
const std::vector<int64_t>& need_array(const aclIntArray* array, const char* name);
const aclScalar& need_scalar(const aclScalar* scalar, const char* name);

}  // namespace aclemu::math

// The two phases of the vendor function `name`: the first, with the parameters `params`, builds
// its plan with the expression after them (variadic: it may hold commas); the second launches it.
#define ACLEMU_TWO_PHASES(name, params, ...)                                                    \
  ACLEMU_API aclnnStatus name##GetWorkspaceSize params {                                        \
    return aclemu::prepare(#name "GetWorkspaceSize", #name, workspaceSize, executor,            \
                           [&] { return __VA_ARGS__; });                                        \
  }                                                                                             \
  ACLEMU_API aclnnStatus name(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, \
                              aclrtStream stream) {                                             \
    return aclemu::launch(#name, workspace, workspaceSize, executor, stream);                   \
  }                                                                                             \
  static_assert(std::is_same_v<decltype(&name), oao::acl::Launch>);
