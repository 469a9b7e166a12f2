// One aclnn call as ONNX Runtime runs it: aclTensors over ORT's device buffers, the vendor's two
// phases, workspace from the execution provider's allocator, launch on its stream, vendor errors as
// ORT statuses. Every object a call creates is released on every path.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "aclnn/cann.h"
#include "aclnn/uploads.h"
#include "ort/io.h"

namespace oao {

template <class T>
constexpr aclDataType acl_type() {
  if constexpr (std::is_same_v<T, float>) return ACL_FLOAT;
  if constexpr (std::is_same_v<T, Ort::Float16_t>) return ACL_FLOAT16;
  if constexpr (std::is_same_v<T, Ort::BFloat16_t>) return ACL_BF16;
  if constexpr (std::is_same_v<T, int32_t>) return ACL_INT32;
  if constexpr (std::is_same_v<T, int64_t>) return ACL_INT64;
}

// The device allocator of the kernel's execution provider (KernelInfoGetAllocator: the CANN EP
// refuses memory infos made with CreateMemoryInfo("Cann")).
struct AllocatorRelease {
  void operator()(OrtAllocator* allocator) const { Ort::GetApi().ReleaseAllocator(allocator); }
};
using DeviceAllocator = std::unique_ptr<OrtAllocator, AllocatorRelease>;
DeviceAllocator device_allocator(const OrtKernelInfo* info);

// An aclnn kernel: the op's signature, and the device allocator its calls take memory from.
template <class OpSignature>
struct AclnnKernel : OpSignature {
  explicit AclnnKernel(const OrtKernelInfo* info) : OpSignature(info), allocator(device_allocator(info)) {}

  DeviceAllocator allocator;
  uploads::Lease uploads;
};

class DeviceBuffer;

class AclnnCall {
 public:
  AclnnCall(const char* op, const Io& io, OrtAllocator* allocator) : AclnnCall(op, io.stream(), allocator) {}
  AclnnCall(const char* op, void* stream, OrtAllocator* allocator);
  ~AclnnCall();
  AclnnCall(const AclnnCall&) = delete;
  AclnnCall& operator=(const AclnnCall&) = delete;

  const acl::Cann& cann() const { return cann_; }
  // The execution provider's stream the call's work is queued on.
  void* stream() const { return stream_; }
  // The copies queued so far are in use by work launched on another stream, after them (a
  // collective's): the call need not wait for them when it ends.
  void launched() { copies_unlaunched_ = false; }
  // The runtime's message of the last failure on this thread ("" when it has none).
  std::string recent_error() const;

  // A contiguous ND aclTensor over `data` (no copy), viewed with `shape`.
  const aclTensor* tensor(const void* data, const Shape& shape, aclDataType type);
  // A strided ND view over the storage `data` holds (`offset` and `strides` in elements).
  const aclTensor* view(const void* data, const Shape& shape, const Shape& strides, int64_t offset,
                        const Shape& storage, aclDataType type);

  // A host aclScalar holding `value` as `type` (the vendor copies it in the first phase).
  const aclScalar* scalar(double value, aclDataType type);

  // A host aclIntArray holding `values` (the vendor copies them in the first phase), destroyed
  // with the call's tensors.
  const aclIntArray* int_array(const std::vector<int64_t>& values);

  // An aclTensorList of `tensors` (made by `tensor`), which then owns them: destroyed with it.
  const aclTensorList* tensor_list(std::initializer_list<const aclTensor*> tensors);
  const aclTensorList* tensor_list(const std::vector<const aclTensor*>& tensors);

  // Device memory from the EP's allocator that lives as long as the call, for outputs aclnn
  // writes but the node does not take.
  void* scratch(size_t bytes);

  // `bytes` of host memory copied into device memory that lives as long as the call (a host
  // scalar that the vendor function takes as a device tensor).
  void* to_device(const void* host, size_t bytes);
  // The same for a scalar every node of a step uploads alike (uploads.h): once per value.
  const void* scalar_to_device(const void* host, size_t bytes);
  // The same for static host data that never changes: once per device and process.
  const void* constant_to_device(const std::vector<uint8_t>& host);

  // A device-to-device copy queued on the stream; nothing when dst is src. Until a launch
  // follows it, the call waits for it on destruction: a refused call's node frees the buffers
  // the copy writes as soon as the kernel returns.
  void copy_on_stream(void* dst, const void* src, size_t bytes);

  // aclnn<name>GetWorkspaceSize(args..., &size, &executor), then aclnn<name>(workspace, size,
  // executor, stream). The stream orders the work; the host does not wait for it.
  template <class Prepare, class... Args>
  Ort::Status run(const std::string& name, Args... args) {
    const std::string prepare_name = name + "GetWorkspaceSize";
    const auto prepare = cann_.op<Prepare>(prepare_name.c_str());
    const auto launch = cann_.op<acl::Launch>(name.c_str());
    uint64_t workspace_size = 0;
    aclOpExecutor* executor = nullptr;
    const aclnnStatus code = prepare(args..., &workspace_size, &executor);
    return code == acl::kSuccess ? launch_prepared(name, launch, workspace_size, executor)
                                 : vendor_error(prepare_name, code, executor);
  }

  // `count` values copied from device memory once the stream's earlier work (which may produce
  // them) is done: the one place the host waits for the device, for checks on index values.
  template <class I>
  std::vector<I> to_host(const void* device, int64_t count) const {
    std::vector<I> host(count);
    copy_to_host(host.data(), device, host.size() * sizeof(I));
    return host;
  }

 private:
  Ort::Status launch_prepared(const std::string& name, acl::Launch launch, uint64_t workspace_size,
                              aclOpExecutor* executor) const;
  Ort::Status vendor_error(const std::string& function, aclnnStatus code, aclOpExecutor* executor) const;
  Ort::Status wait_for_device(const std::string& name) const;
  void copy_to_host(void* host, const void* device, size_t bytes) const;

  const char* op_;
  const acl::Cann& cann_;
  OrtAllocator* allocator_;
  void* stream_;
  acl::CreateTensor create_tensor_;
  acl::DestroyTensor destroy_tensor_;  // resolved up front: the destructor must not throw
  acl::SynchronizeStream synchronize_stream_;
  mutable bool copies_unlaunched_ = false;
  std::vector<aclTensor*> tensors_;
  // Resolved on the first int_array (few ops take one), before any is created.
  acl::DestroyIntArray destroy_int_array_ = nullptr;
  std::vector<aclIntArray*> int_arrays_;
  acl::DestroyTensorList destroy_tensor_list_ = nullptr;  // as destroy_int_array_
  std::vector<aclTensorList*> tensor_lists_;
  acl::DestroyScalar destroy_scalar_ = nullptr;  // as destroy_int_array_
  std::vector<aclScalar*> scalars_;
  std::vector<std::unique_ptr<DeviceBuffer>> scratch_;
  std::vector<uploads::Slot*> pinned_;
};

}  // namespace oao
