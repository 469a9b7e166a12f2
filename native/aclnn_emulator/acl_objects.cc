// libascendcl.so: the tensor descriptions, data buffers and attribute sets that aclop calls take.
// Each is a real object, live from its create to its destroy call, with CANN's checks.
#include "acl_objects.h"

#include <mutex>
#include <type_traits>
#include <unordered_set>

#include "tensor.h"

using namespace aclemu;
using namespace aclemu::acl_error;

namespace {

struct Registry {
  std::mutex mu;
  std::unordered_set<const void*> live[3];
};

// Leaked on purpose, like the runtime state: other libraries may call in while the process exits.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

void add_live(AclObject kind, const void* object) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().live[static_cast<int>(kind)].insert(object);
}

bool remove_live(AclObject kind, const void* object) {
  std::lock_guard<std::mutex> lock(registry().mu);
  return registry().live[static_cast<int>(kind)].erase(object) == 1;
}

const char* kind_name(AclObject kind) {
  switch (kind) {
    case AclObject::kTensorDesc:
      return "aclTensorDesc";
    case AclObject::kDataBuffer:
      return "aclDataBuffer";
    case AclObject::kOpAttr:
      return "aclopAttr";
  }
  return "object";
}

aclError invalid(const char* symbol, const std::string& rule) {
  hooks().set_error(std::string(symbol) + ": " + rule);
  return kInvalidParam;
}

// The body of the void destroy calls: one of `kind` this library made and has not destroyed is
// deleted; NULL is ignored, and anything else is refused as invalid.
template <class Object>
void destroy_live(const char* symbol, AclObject kind, const Object* object, const char* name) {
  if (hooks().enter(symbol) != 0 || object == nullptr) return;
  if (!remove_live(kind, object)) {
    invalid(symbol,
            std::string(name) + " is not a live " + kind_name(kind) + ": destroyed twice, or never created");
    return;
  }
  delete object;
}

// Empty when `object` may be used, else the broken rule.
std::string unusable(AclObject kind, const void* object, const char* name) {
  if (object == nullptr) return std::string(name) + " is NULL";
  if (!aclemu_acl_object_live(kind, object))
    return std::string(name) + " is not a live " + kind_name(kind) + ": destroyed, or never created";
  return {};
}

// The shared body of the aclopSetAttr* calls.
aclError set_attr(const char* symbol, aclopAttr* attr, const char* name, AttrValue value) {
  if (aclError injected = hooks().enter(symbol)) return injected;
  if (std::string rule = unusable(AclObject::kOpAttr, attr, "attr"); !rule.empty()) return invalid(symbol, rule);
  if (name == nullptr || *name == '\0') return invalid(symbol, "attrName is NULL or empty");
  attr->values[name] = std::move(value);  // setting a name again replaces its value, as CANN does
  return 0;
}

}  // namespace

ACLEMU_API bool aclemu_acl_object_live(AclObject kind, const void* object) {
  std::lock_guard<std::mutex> lock(registry().mu);
  return registry().live[static_cast<int>(kind)].count(object) == 1;
}

ACLEMU_API size_t aclDataTypeSize(aclDataType dataType) {
  if (hooks().enter("aclDataTypeSize") != 0) return 0;
  return element_size(dataType);
}

ACLEMU_API aclTensorDesc* aclCreateTensorDesc(aclDataType dataType, int numDims, const int64_t* dims,
                                              aclFormat format) {
  constexpr const char* kSymbol = "aclCreateTensorDesc";
  if (hooks().enter(kSymbol) != 0) return nullptr;
  if (element_size(dataType) == 0) {
    invalid(kSymbol, "dataType " + std::to_string(static_cast<int>(dataType)) + " is not emulated");
    return nullptr;
  }
  if (numDims < 0) {
    invalid(kSymbol, "numDims " + std::to_string(numDims) + " is negative");
    return nullptr;
  }
  if (numDims > 0 && dims == nullptr) {
    invalid(kSymbol, "dims is NULL but numDims is " + std::to_string(numDims));
    return nullptr;
  }
  std::vector<int64_t> shape(dims, dims + numDims);
  for (int i = 0; i < numDims; ++i) {
    if (shape[i] < 0) {
      // -1 and -2 describe dynamic shapes, which only graph compilation resolves.
      invalid(kSymbol, "dims[" + std::to_string(i) + "] = " + std::to_string(shape[i]) +
                           ": dynamic shapes are not emulated");
      return nullptr;
    }
  }
  auto* desc = new aclTensorDesc{dataType, std::move(shape), format, false};
  add_live(AclObject::kTensorDesc, desc);
  return desc;
}

ACLEMU_API void aclDestroyTensorDesc(const aclTensorDesc* desc) {
  destroy_live("aclDestroyTensorDesc", AclObject::kTensorDesc, desc, "desc");
}

ACLEMU_API size_t aclGetTensorDescSize(const aclTensorDesc* desc) {
  if (hooks().enter("aclGetTensorDescSize") != 0) return 0;
  if (!unusable(AclObject::kTensorDesc, desc, "desc").empty()) return 0;  // CANN: 0 for no desc
  return static_cast<size_t>(numel(desc->dims)) * element_size(desc->dtype);
}

ACLEMU_API size_t aclGetTensorDescNumDims(const aclTensorDesc* desc) {
  if (hooks().enter("aclGetTensorDescNumDims") != 0) return 0;
  if (!unusable(AclObject::kTensorDesc, desc, "desc").empty()) return 0;
  return desc->dims.size();
}

ACLEMU_API aclError aclGetTensorDescDimV2(const aclTensorDesc* desc, size_t index, int64_t* dimSize) {
  constexpr const char* kSymbol = "aclGetTensorDescDimV2";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  if (std::string rule = unusable(AclObject::kTensorDesc, desc, "desc"); !rule.empty()) return invalid(kSymbol, rule);
  if (dimSize == nullptr) return invalid(kSymbol, "dimSize is NULL");
  if (index >= desc->dims.size()) {
    return invalid(kSymbol, "index " + std::to_string(index) + " outside the desc's " +
                                std::to_string(desc->dims.size()) + " dims");
  }
  *dimSize = desc->dims[index];
  return 0;
}

ACLEMU_API aclError aclSetTensorConst(aclTensorDesc* desc, void* dataBuffer, size_t length) {
  constexpr const char* kSymbol = "aclSetTensorConst";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  if (std::string rule = unusable(AclObject::kTensorDesc, desc, "desc"); !rule.empty()) return invalid(kSymbol, rule);
  if (dataBuffer == nullptr) return invalid(kSymbol, "dataBuffer is NULL");
  const size_t want = static_cast<size_t>(numel(desc->dims)) * element_size(desc->dtype);
  if (length != want) {
    return invalid(kSymbol, "length " + std::to_string(length) + " differs from the " + std::to_string(want) +
                                " bytes the desc " + shape_text(desc->dims) + " " + dtype_name(desc->dtype) +
                                " describes");
  }
  desc->is_const = true;
  return 0;
}

ACLEMU_API aclDataBuffer* aclCreateDataBuffer(void* data, size_t size) {
  constexpr const char* kSymbol = "aclCreateDataBuffer";
  if (hooks().enter(kSymbol) != 0) return nullptr;
  if (data == nullptr && size > 0) {
    invalid(kSymbol, "data is NULL but size is " + std::to_string(size));
    return nullptr;
  }
  auto* buffer = new aclDataBuffer{data, size};
  add_live(AclObject::kDataBuffer, buffer);
  return buffer;
}

ACLEMU_API aclError aclDestroyDataBuffer(const aclDataBuffer* dataBuffer) {
  constexpr const char* kSymbol = "aclDestroyDataBuffer";
  if (aclError injected = hooks().enter(kSymbol)) return injected;
  if (dataBuffer == nullptr) return invalid(kSymbol, "dataBuffer is NULL");
  if (!remove_live(AclObject::kDataBuffer, dataBuffer))
    return invalid(kSymbol, "dataBuffer is not a live aclDataBuffer: destroyed twice, or never created");
  delete dataBuffer;
  return 0;
}

ACLEMU_API void* aclGetDataBufferAddr(const aclDataBuffer* dataBuffer) {
  constexpr const char* kSymbol = "aclGetDataBufferAddr";
  if (hooks().enter(kSymbol) != 0) return nullptr;
  if (std::string rule = unusable(AclObject::kDataBuffer, dataBuffer, "dataBuffer"); !rule.empty()) {
    invalid(kSymbol, rule);
    return nullptr;
  }
  return dataBuffer->data;
}

ACLEMU_API aclopAttr* aclopCreateAttr() {
  if (hooks().enter("aclopCreateAttr") != 0) return nullptr;
  auto* attr = new aclopAttr;
  add_live(AclObject::kOpAttr, attr);
  return attr;
}

ACLEMU_API void aclopDestroyAttr(const aclopAttr* attr) {
  destroy_live("aclopDestroyAttr", AclObject::kOpAttr, attr, "attr");
}

ACLEMU_API aclError aclopSetAttrBool(aclopAttr* attr, const char* attrName, uint8_t attrValue) {
  return set_attr("aclopSetAttrBool", attr, attrName, attrValue != 0);
}

ACLEMU_API aclError aclopSetAttrInt(aclopAttr* attr, const char* attrName, int64_t attrValue) {
  return set_attr("aclopSetAttrInt", attr, attrName, attrValue);
}

ACLEMU_API aclError aclopSetAttrFloat(aclopAttr* attr, const char* attrName, float attrValue) {
  return set_attr("aclopSetAttrFloat", attr, attrName, attrValue);
}

ACLEMU_API aclError aclopSetAttrString(aclopAttr* attr, const char* attrName, const char* attrValue) {
  constexpr const char* kSymbol = "aclopSetAttrString";
  if (attrValue == nullptr) {
    if (aclError injected = hooks().enter(kSymbol)) return injected;
    return invalid(kSymbol, "attrValue is NULL");
  }
  return set_attr(kSymbol, attr, attrName, std::string(attrValue));
}

ACLEMU_API aclError aclopSetAttrListInt(aclopAttr* attr, const char* attrName, int numValues,
                                        const int64_t* values) {
  constexpr const char* kSymbol = "aclopSetAttrListInt";
  if (numValues < 0 || (numValues > 0 && values == nullptr)) {
    if (aclError injected = hooks().enter(kSymbol)) return injected;
    return invalid(kSymbol, "values is NULL or numValues " + std::to_string(numValues) + " is negative");
  }
  return set_attr(kSymbol, attr, attrName, std::vector<int64_t>(values, values + numValues));
}
