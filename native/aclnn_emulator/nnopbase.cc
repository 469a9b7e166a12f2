// libnnopbase.so: tensor, tensor-list and int-array descriptors and the explicit executor destroy.
#include <memory>
#include <type_traits>

#include "elements.h"
#include "op.h"
#include "tensor.h"

namespace {

using namespace aclemu;

constexpr uint64_t kMaxRank = 8;

// Empty when the arguments describe a tensor, else why not.
std::string invalid_reason(const int64_t* view_dims, uint64_t view_dims_num, aclDataType data_type,
                           const int64_t* stride, int64_t offset, const int64_t* storage_dims,
                           uint64_t storage_dims_num) {
  if (view_dims_num > kMaxRank || storage_dims_num > kMaxRank) return "at most 8 dims are supported";
  if (view_dims_num > 0 && view_dims == nullptr) return "viewDims is NULL";
  if (view_dims_num > 0 && stride == nullptr) return "stride is NULL";
  if (storage_dims_num > 0 && storage_dims == nullptr) return "storageDims is NULL";
  if (element_size(data_type) == 0) return "unknown dataType " + std::to_string(static_cast<int>(data_type));
  if (offset < 0) return "offset is negative";
  for (uint64_t i = 0; i < view_dims_num; ++i) {
    if (view_dims[i] < 0) return "viewDims[" + std::to_string(i) + "] is negative";
    if (stride[i] < 0) return "stride[" + std::to_string(i) + "] is negative";
  }
  for (uint64_t i = 0; i < storage_dims_num; ++i) {
    if (storage_dims[i] < 0) return "storageDims[" + std::to_string(i) + "] is negative";
  }
  return {};
}

}  // namespace

ACLEMU_API aclTensor* aclCreateTensor(const int64_t* view_dims, uint64_t view_dims_num, aclDataType data_type,
                                      const int64_t* stride, int64_t offset, aclFormat format,
                                      const int64_t* storage_dims, uint64_t storage_dims_num,
                                      void* tensor_data) {
  if (hooks().enter("aclCreateTensor") != 0) return nullptr;
  const std::string why =
      invalid_reason(view_dims, view_dims_num, data_type, stride, offset, storage_dims, storage_dims_num);
  if (!why.empty()) {
    hooks().set_error("aclCreateTensor: " + why);
    return nullptr;
  }
  auto* t = new aclTensor{{view_dims, view_dims + view_dims_num},
                          {stride, stride + view_dims_num},
                          {storage_dims, storage_dims + storage_dims_num},
                          offset,
                          data_type,
                          format,
                          tensor_data};
  hooks().add_live(Kind::kTensor, t);
  return t;
}

ACLEMU_API aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
  if (aclnnStatus injected = hooks().enter("aclDestroyTensor")) return injected;
  if (tensor == nullptr) return kSuccess;
  if (!hooks().remove_live(Kind::kTensor, tensor)) {
    hooks().set_error("aclDestroyTensor: not a live aclTensor (destroyed twice?)");
    return kErrParamInvalid;
  }
  // As the vendor's executor, queued work keeps what it reads from the tensor past this call.
  if (!hooks().defer_delete(tensor)) delete tensor;
  return kSuccess;
}

ACLEMU_API aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  if (hooks().enter("aclCreateIntArray") != 0) return nullptr;
  if (size > 0 && value == nullptr) {
    hooks().set_error("aclCreateIntArray: value is NULL");
    return nullptr;
  }
  auto* array = new aclIntArray{{value, value + size}};
  hooks().add_live(Kind::kIntArray, array);
  return array;
}

// The first phase copied the values, so no queued work keeps the array.
ACLEMU_API aclnnStatus aclDestroyIntArray(const aclIntArray* array) {
  if (aclnnStatus injected = hooks().enter("aclDestroyIntArray")) return injected;
  if (array == nullptr) return kSuccess;
  if (!hooks().remove_live(Kind::kIntArray, array)) {
    hooks().set_error("aclDestroyIntArray: not a live aclIntArray (destroyed twice?)");
    return kErrParamInvalid;
  }
  delete array;
  return kSuccess;
}

// The list takes the tensors: they must be live, and each in one list at most is the caller's
// business, as on the vendor's runtime.
ACLEMU_API aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size) {
  if (hooks().enter("aclCreateTensorList") != 0) return nullptr;
  if (size > 0 && value == nullptr) {
    hooks().set_error("aclCreateTensorList: value is NULL");
    return nullptr;
  }
  for (uint64_t i = 0; i < size; ++i) {
    if (!hooks().is_live(Kind::kTensor, value[i])) {
      hooks().set_error("aclCreateTensorList: value[" + std::to_string(i) + "] is not a live aclTensor");
      return nullptr;
    }
  }
  auto* list = new aclTensorList{{value, value + size}};
  hooks().add_live(Kind::kTensorList, list);
  return list;
}

ACLEMU_API aclnnStatus aclDestroyTensorList(const aclTensorList* array) {
  if (aclnnStatus injected = hooks().enter("aclDestroyTensorList")) return injected;
  if (array == nullptr) return kSuccess;
  if (!hooks().remove_live(Kind::kTensorList, array)) {
    hooks().set_error("aclDestroyTensorList: not a live aclTensorList (destroyed twice?)");
    return kErrParamInvalid;
  }
  aclnnStatus status = kSuccess;
  for (const aclTensor* tensor : array->tensors) {
    if (const aclnnStatus code = aclDestroyTensor(tensor); code != kSuccess) status = code;
  }
  delete array;
  return status;
}

ACLEMU_API aclScalar* aclCreateScalar(void* value, aclDataType data_type) {
  if (hooks().enter("aclCreateScalar") != 0) return nullptr;
  if (value == nullptr) {
    hooks().set_error("aclCreateScalar: value is NULL");
    return nullptr;
  }
  auto* scalar = new aclScalar{data_type, 0.0, 0};
  switch (data_type) {  // the vendor reads as many bytes as the type has
    case ACL_FLOAT: scalar->value = *static_cast<const float*>(value); break;
    case ACL_DOUBLE: scalar->value = *static_cast<const double*>(value); break;
    case ACL_FLOAT16:
    case ACL_BF16: scalar->value = load_float(value, data_type); break;
    case ACL_INT32:
    case ACL_INT64:
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_BOOL: scalar->integer = load_int(value, data_type); break;
    default:
      delete scalar;
      hooks().set_error("aclCreateScalar: unsupported dataType " + std::to_string(static_cast<int>(data_type)));
      return nullptr;
  }
  if (scalar->value == 0.0 && scalar->integer != 0) scalar->value = static_cast<double>(scalar->integer);
  if (scalar->integer == 0 && scalar->value != 0.0) scalar->integer = static_cast<int64_t>(scalar->value);
  hooks().add_live(Kind::kScalar, scalar);
  return scalar;
}

ACLEMU_API aclnnStatus aclDestroyScalar(const aclScalar* scalar) {
  if (aclnnStatus injected = hooks().enter("aclDestroyScalar")) return injected;
  if (scalar == nullptr) return kSuccess;
  if (!hooks().remove_live(Kind::kScalar, scalar)) {
    hooks().set_error("aclDestroyScalar: not a live aclScalar (destroyed twice?)");
    return kErrParamInvalid;
  }
  delete scalar;
  return kSuccess;
}

// For an executor whose second phase never ran; the second phase frees its own.
ACLEMU_API aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  if (aclnnStatus injected = hooks().enter("aclDestroyAclOpExecutor")) return injected;
  if (executor == nullptr) {  // the vendor's documented failure
    hooks().set_error("aclDestroyAclOpExecutor: executor is NULL");
    return kErrInnerNullptr;
  }
  if (!hooks().remove_live(Kind::kExecutor, executor)) {
    hooks().set_error("aclDestroyAclOpExecutor: executor is not live: already launched or destroyed");
    return kErrInner;
  }
  delete executor;
  return kSuccess;
}

static_assert(std::is_same_v<decltype(&aclCreateTensor), oao::acl::CreateTensor>);
static_assert(std::is_same_v<decltype(&aclDestroyTensor), oao::acl::DestroyTensor>);
static_assert(std::is_same_v<decltype(&aclCreateIntArray), oao::acl::CreateIntArray>);
static_assert(std::is_same_v<decltype(&aclDestroyIntArray), oao::acl::DestroyIntArray>);
static_assert(std::is_same_v<decltype(&aclCreateTensorList), oao::acl::CreateTensorList>);
static_assert(std::is_same_v<decltype(&aclDestroyTensorList), oao::acl::DestroyTensorList>);
static_assert(std::is_same_v<decltype(&aclDestroyAclOpExecutor), oao::acl::DestroyExecutor>);
static_assert(std::is_same_v<decltype(&aclCreateScalar), oao::acl::CreateScalar>);
static_assert(std::is_same_v<decltype(&aclDestroyScalar), oao::acl::DestroyScalar>);
