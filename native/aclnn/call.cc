#include "aclnn/call.h"

#include <algorithm>
#include <stdexcept>

namespace oao {
namespace {

const char* code_name(aclnnStatus code) {
  switch (code) {
    case acl::kErrParamNullptr:
      return "ACLNN_ERR_PARAM_NULLPTR";
    case acl::kErrParamInvalid:
      return "ACLNN_ERR_PARAM_INVALID";
    case acl::kErrRuntime:
      return "ACLNN_ERR_RUNTIME_ERROR";
    case acl::kErrInner:
      return "ACLNN_ERR_INNER";
    case acl::kErrInferShape:
      return "ACLNN_ERR_INNER_INFERSHAPE_ERROR";
    case acl::kErrTiling:
      return "ACLNN_ERR_INNER_TILING_ERROR";
    case acl::kErrFindKernel:
      return "ACLNN_ERR_INNER_FIND_KERNEL_ERROR";
    case acl::kErrCreateExecutor:
      return "ACLNN_ERR_INNER_CREATE_EXECUTOR";
    case acl::kErrInnerNullptr:
      return "ACLNN_ERR_INNER_NULLPTR";
    case acl::kErrOppPathNotFound:
      return "ACLNN_ERR_INNER_OPP_PATH_NOT_FOUND";
    case acl::kErrOppKernelPkgNotFound:
      return "ACLNN_ERR_INNER_OPP_KERNEL_PKG_NOT_FOUND";
  }
  return "unknown aclnn status";
}

// Argument codes mean the caller can fix the call; the rest are the installation's or the
// device's.
OrtErrorCode ort_code(aclnnStatus code) {
  switch (code) {
    case acl::kErrParamNullptr:
    case acl::kErrParamInvalid:
    case acl::kErrInferShape:
    case acl::kErrTiling:
      return ORT_INVALID_ARGUMENT;
    case acl::kErrFindKernel:
    case acl::kErrOppPathNotFound:
    case acl::kErrOppKernelPkgNotFound:
      return ORT_NOT_IMPLEMENTED;
  }
  return ORT_RUNTIME_EXCEPTION;
}

}  // namespace

// Device memory for one launch. It goes back to the allocator as soon as the launch is queued,
// without waiting for the stream: the EP's arena hands it out again only to work queued later on
// the same stream, which runs after this op (the CANN EP's own kernels free scratch memory so).
class DeviceBuffer {
 public:
  DeviceBuffer(OrtAllocator* allocator, uint64_t size) : allocator_(allocator) {
    if (size == 0) return;
    data_ = allocator->Alloc(allocator, size);
    if (data_ == nullptr) {
      throw std::runtime_error("could not allocate " + std::to_string(size) + " bytes of device memory");
    }
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) allocator_->Free(allocator_, data_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }

 private:
  OrtAllocator* allocator_;
  void* data_ = nullptr;
};

DeviceAllocator device_allocator(const OrtKernelInfo* info) {
  OrtAllocator* allocator = nullptr;
  Ort::ThrowOnError(Ort::GetApi().KernelInfoGetAllocator(info, OrtMemTypeDefault, &allocator));
  return DeviceAllocator(allocator);
}

AclnnCall::AclnnCall(const char* op, void* stream, OrtAllocator* allocator)
    : op_(op),
      cann_(acl::Cann::get()),
      allocator_(allocator),
      stream_(stream),
      create_tensor_(cann_.base<acl::CreateTensor>("aclCreateTensor")),
      destroy_tensor_(cann_.base<acl::DestroyTensor>("aclDestroyTensor")),
      synchronize_stream_(cann_.base<acl::SynchronizeStream>("aclrtSynchronizeStream")) {}

AclnnCall::~AclnnCall() {
  // A failed wait leaves nothing better to do: the call's error is already on its way.
  if (copies_unlaunched_) static_cast<void>(synchronize_stream_(stream_));
  for (aclTensor* tensor : tensors_) destroy_tensor_(tensor);
  for (aclIntArray* array : int_arrays_) destroy_int_array_(array);
  for (aclTensorList* list : tensor_lists_) destroy_tensor_list_(list);
  for (aclScalar* scalar : scalars_) destroy_scalar_(scalar);
  for (uploads::Slot* slot : pinned_) uploads::unpin(slot);
}

const aclTensor* AclnnCall::tensor(const void* data, const Shape& shape, aclDataType type) {
  Shape strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return view(data, shape, strides, 0, shape, type);
}

const aclTensor* AclnnCall::view(const void* data, const Shape& shape, const Shape& strides, int64_t offset,
                                 const Shape& storage, aclDataType type) {
  static_assert(sizeof(int64_t) == sizeof(Shape::value_type));
  tensors_.reserve(tensors_.size() + 1);  // so that push_back cannot throw and leak the tensor
  aclTensor* tensor = create_tensor_(shape.data(), shape.size(), type, strides.data(), offset, ACL_FORMAT_ND,
                                     storage.data(), storage.size(), const_cast<void*>(data));
  if (tensor == nullptr) {
    throw std::runtime_error("aclCreateTensor refused a tensor of shape " + shape_str(shape));
  }
  tensors_.push_back(tensor);
  return tensor;
}

const aclScalar* AclnnCall::scalar(double value, aclDataType type) {
  const auto create = cann_.base<acl::CreateScalar>("aclCreateScalar");
  if (destroy_scalar_ == nullptr) destroy_scalar_ = cann_.base<acl::DestroyScalar>("aclDestroyScalar");
  // The scalar holds the value in its own type: the vendor reads as many bytes as the type has.
  union {
    float f;
    double d;
    int32_t i32;
    int64_t i64;
    uint16_t h;
    bool b;
  } storage{};
  switch (type) {
    case ACL_FLOAT:
      storage.f = static_cast<float>(value);
      break;
    case ACL_DOUBLE:
      storage.d = value;
      break;
    case ACL_INT32:
      storage.i32 = static_cast<int32_t>(value);
      break;
    case ACL_INT64:
      storage.i64 = static_cast<int64_t>(value);
      break;
    case ACL_BOOL:
      storage.b = value != 0;
      break;
    default:
      throw std::runtime_error("no aclScalar of element type " + std::to_string(type));
  }
  scalars_.reserve(scalars_.size() + 1);
  aclScalar* scalar = create(&storage, type);
  if (scalar == nullptr) throw std::runtime_error("aclCreateScalar refused a scalar");
  scalars_.push_back(scalar);
  return scalar;
}

const aclIntArray* AclnnCall::int_array(const std::vector<int64_t>& values) {
  const auto create = cann_.base<acl::CreateIntArray>("aclCreateIntArray");
  if (destroy_int_array_ == nullptr)
    destroy_int_array_ = cann_.base<acl::DestroyIntArray>("aclDestroyIntArray");
  int_arrays_.reserve(int_arrays_.size() + 1);  // so that push_back cannot throw and leak the array
  aclIntArray* array = create(values.data(), values.size());
  if (array == nullptr) {
    throw std::runtime_error("aclCreateIntArray refused an array of " + std::to_string(values.size()) +
                             " values");
  }
  int_arrays_.push_back(array);
  return array;
}

const aclTensorList* AclnnCall::tensor_list(std::initializer_list<const aclTensor*> tensors) {
  return tensor_list(std::vector<const aclTensor*>(tensors));
}

const aclTensorList* AclnnCall::tensor_list(const std::vector<const aclTensor*>& tensors) {
  const auto create = cann_.base<acl::CreateTensorList>("aclCreateTensorList");
  if (destroy_tensor_list_ == nullptr)
    destroy_tensor_list_ = cann_.base<acl::DestroyTensorList>("aclDestroyTensorList");
  tensor_lists_.reserve(tensor_lists_.size() + 1);  // so that push_back cannot throw and leak the list
  aclTensorList* list = create(tensors.data(), tensors.size());
  if (list == nullptr) {
    throw std::runtime_error("aclCreateTensorList refused a list of " + std::to_string(tensors.size()) +
                             " tensors");
  }
  tensor_lists_.push_back(list);
  // The list destroys them now: destroyed again with the call's tensors, they would be freed twice.
  for (const aclTensor* tensor : tensors)
    tensors_.erase(std::remove(tensors_.begin(), tensors_.end(), tensor), tensors_.end());
  return list;
}

void* AclnnCall::scratch(size_t bytes) {
  scratch_.push_back(std::make_unique<DeviceBuffer>(allocator_, bytes));
  return scratch_.back()->data();
}

Ort::Status AclnnCall::launch_prepared(const std::string& name, acl::Launch launch, uint64_t workspace_size,
                                       aclOpExecutor* executor) const {
  // The executor is ours to free until the second phase takes it, e.g. when the workspace
  // allocation fails.
  const auto destroy = cann_.base<acl::DestroyExecutor>("aclDestroyAclOpExecutor");
  std::unique_ptr<aclOpExecutor, acl::DestroyExecutor> pending(executor, destroy);
  const DeviceBuffer workspace(allocator_, workspace_size);
  const aclnnStatus code = launch(workspace.data(), workspace_size, pending.release(), stream_);
  if (code != acl::kSuccess) return vendor_error(name, code, nullptr);
  copies_unlaunched_ = false;  // the kernel, queued after them, keeps their buffers in use
  // No stream: the test build under the CPU EP, whose node outputs must be ready when Compute
  // returns and whose workspace is host memory freed on return. The CANN EP always gives one.
  return stream_ == nullptr ? wait_for_device(name) : Ort::Status(nullptr);
}

Ort::Status AclnnCall::wait_for_device(const std::string& name) const {
  const aclError code = cann_.base<acl::SynchronizeDevice>("aclrtSynchronizeDevice")();
  if (code == 0) return Ort::Status(nullptr);
  const char* detail = cann_.base<acl::GetRecentErrMsg>("aclGetRecentErrMsg")();
  std::string message = std::string(op_) + ": " + name + " failed on the device (aclrtSynchronizeDevice " +
                        std::to_string(code) + ")";
  if (detail != nullptr && *detail != '\0') message += ": " + std::string(detail);
  return Ort::Status(message.c_str(), ORT_RUNTIME_EXCEPTION);
}

Ort::Status AclnnCall::vendor_error(const std::string& function, aclnnStatus code,
                                    aclOpExecutor* executor) const {
  if (executor != nullptr) cann_.base<acl::DestroyExecutor>("aclDestroyAclOpExecutor")(executor);
  const char* detail = cann_.base<acl::GetRecentErrMsg>("aclGetRecentErrMsg")();
  std::string message = std::string(op_) + ": " + function + " failed with " + std::to_string(code) + " (" +
                        code_name(code) + ")";
  if (detail != nullptr && *detail != '\0') message += ": " + std::string(detail);
  return Ort::Status(message.c_str(), ort_code(code));
}

void AclnnCall::copy_to_host(void* host, const void* device, size_t bytes) const {
  if (bytes == 0) return;
  const auto synchronize = cann_.base<acl::SynchronizeStream>("aclrtSynchronizeStream");
  const auto memcpy = cann_.base<acl::Memcpy>("aclrtMemcpy");
  aclError code = synchronize(stream_);
  if (code == 0) code = memcpy(host, bytes, device, bytes, acl::kMemcpyDeviceToHost);
  if (code != 0) {
    throw std::runtime_error("reading " + std::to_string(bytes) + " bytes back from the device failed with " +
                             std::to_string(code));
  }
}

void* AclnnCall::to_device(const void* host, size_t bytes) {
  void* device = scratch(bytes);
  // A synchronous copy waits for no stream: the scratch may be memory that earlier work queued
  // on the stream still uses.
  aclError code = synchronize_stream_(stream_);
  if (code == 0)
    code = cann_.base<acl::Memcpy>("aclrtMemcpy")(device, bytes, host, bytes, acl::kMemcpyHostToDevice);
  if (code != 0) {
    throw std::runtime_error("copying " + std::to_string(bytes) + " bytes to the device failed with " +
                             std::to_string(code));
  }
  return device;
}

const void* AclnnCall::scalar_to_device(const void* host, size_t bytes) {
  pinned_.reserve(pinned_.size() + 1);  // so that push_back cannot throw and leave the slot pinned
  const uploads::Scalar uploaded = uploads::scalar(cann_, stream_, host, bytes);
  if (uploaded.device == nullptr) return to_device(host, bytes);
  pinned_.push_back(uploaded.slot);
  return uploaded.device;
}

const void* AclnnCall::constant_to_device(const std::vector<uint8_t>& host) {
  if (stream_ != nullptr) {
    if (const void* device = uploads::constant(cann_, host)) return device;
  }
  return to_device(host.data(), host.size());
}

void AclnnCall::copy_on_stream(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  copies_unlaunched_ = true;
  const aclError code = cann_.base<acl::MemcpyAsync>("aclrtMemcpyAsync")(dst, bytes, src, bytes,
                                                                         acl::kMemcpyDeviceToDevice, stream_);
  if (code != 0) {
    throw std::runtime_error("copying " + std::to_string(bytes) + " bytes on the device failed with " +
                             std::to_string(code));
  }
}

std::string AclnnCall::recent_error() const {
  const char* detail = cann_.base<acl::GetRecentErrMsg>("aclGetRecentErrMsg")();
  return detail ? detail : "";
}

}  // namespace oao
