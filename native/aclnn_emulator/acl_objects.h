// The objects of CANN's single-op API: tensor descriptions, data buffers and attribute sets.
// libascendcl.so makes them; libacl_op_compiler.so reads them, so their layout is shared here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "emulator.h"

struct aclTensorDesc {
  aclDataType dtype;
  std::vector<int64_t> dims;
  aclFormat format;
  // Set by aclSetTensorConst. The value itself is not kept: no emulated op takes a constant
  // input, so the op compiler only needs to refuse one.
  bool is_const;
};

struct aclDataBuffer {
  void* data;
  size_t size;  // in bytes
};

namespace aclemu {
using AttrValue = std::variant<bool, int64_t, float, std::string, std::vector<int64_t>>;
enum class AclObject { kTensorDesc, kDataBuffer, kOpAttr };
}  // namespace aclemu

struct aclopAttr {
  std::map<std::string, aclemu::AttrValue> values;
};

// CANN's status codes for these APIs (acl_base.h).
namespace aclemu::acl_error {
enum : aclError {
  kInvalidParam = 100000,
  kOpInputNotMatch = 100021,
  kOpOutputNotMatch = 100022,
  kOpAttrNotMatch = 100023,
  kOpNotFound = 100024,
  kUnsupportedDataType = 100026,
  kFormatNotMatch = 100027,
  kApiNotSupport = 200001,
};
}  // namespace aclemu::acl_error

// Whether `object` is a live object of `kind` made by libascendcl.so: the op compiler's only way
// to tell a destroyed or foreign pointer from a real one before touching it.
ACLEMU_API bool aclemu_acl_object_live(aclemu::AclObject kind, const void* object);
