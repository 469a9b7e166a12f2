// libascendcl.so: the offline-model API (aclmdl*), which ONNX Runtime's CANN execution provider
// links for its graph mode. Offline models are compiled by CANN's graph engine for a real NPU, so
// the emulator has none to run: every call refuses, naming itself in the recent error.
#include "acl_objects.h"

using namespace aclemu;

typedef struct aclmdlDesc aclmdlDesc;
typedef struct aclmdlDataset aclmdlDataset;
typedef struct aclmdlIODims aclmdlIODims;

namespace {

// Counts the call and sets the reason; returns the code (an injected one wins).
aclError refuse(const char* symbol) {
  if (aclError injected = hooks().enter(symbol)) return injected;
  hooks().set_error(std::string(symbol) + ": offline models (CANN graph mode) are not emulated; run the "
                                          "CANN execution provider with enable_cann_graph=0");
  return acl_error::kApiNotSupport;
}

}  // namespace

// Pointers come back NULL and sizes 0, as CANN reports a failure through those results.
ACLEMU_API aclmdlDesc* aclmdlCreateDesc() { return refuse(__func__), nullptr; }
ACLEMU_API aclError aclmdlDestroyDesc(aclmdlDesc*) { return refuse(__func__); }
ACLEMU_API aclError aclmdlGetDesc(aclmdlDesc*, uint32_t) { return refuse(__func__); }
ACLEMU_API size_t aclmdlGetNumInputs(aclmdlDesc*) { return refuse(__func__), 0; }
ACLEMU_API size_t aclmdlGetNumOutputs(aclmdlDesc*) { return refuse(__func__), 0; }
ACLEMU_API size_t aclmdlGetInputSizeByIndex(aclmdlDesc*, size_t) { return refuse(__func__), 0; }
ACLEMU_API size_t aclmdlGetOutputSizeByIndex(aclmdlDesc*, size_t) { return refuse(__func__), 0; }
ACLEMU_API aclError aclmdlGetOutputDims(const aclmdlDesc*, size_t, aclmdlIODims*) { return refuse(__func__); }
ACLEMU_API aclmdlDataset* aclmdlCreateDataset() { return refuse(__func__), nullptr; }
ACLEMU_API aclError aclmdlDestroyDataset(const aclmdlDataset*) { return refuse(__func__); }
ACLEMU_API aclError aclmdlAddDatasetBuffer(aclmdlDataset*, aclDataBuffer*) { return refuse(__func__); }
ACLEMU_API aclDataBuffer* aclmdlGetDatasetBuffer(const aclmdlDataset*, size_t) { return refuse(__func__), nullptr; }
ACLEMU_API aclTensorDesc* aclmdlGetDatasetTensorDesc(const aclmdlDataset*, size_t) {
  return refuse(__func__), nullptr;
}
ACLEMU_API aclError aclmdlLoadFromFile(const char*, uint32_t*) { return refuse(__func__); }
ACLEMU_API aclError aclmdlLoadFromMem(const void*, size_t, uint32_t*) { return refuse(__func__); }
ACLEMU_API aclError aclmdlUnload(uint32_t) { return refuse(__func__); }
ACLEMU_API aclError aclmdlExecute(uint32_t, const aclmdlDataset*, aclmdlDataset*) { return refuse(__func__); }
ACLEMU_API aclError aclmdlExecuteAsync(uint32_t, const aclmdlDataset*, aclmdlDataset*, aclrtStream) {
  return refuse(__func__);
}
