// The library's entry point and its one table of ops.
#include <mutex>

#include "aclnn/call.h"
#include "aclnn/standard/op.h"
#include "ort/ep.h"
#include "ort/ops.h"

namespace oao {
namespace {

// Every op of the schemas, once per execution provider.
struct OpRow {
  void (*cpu)(OpList&);
  void (*aclnn)(OpList&);
};
#define OAO_OP_ROW(op) {add_##op##_cpu, add_##op##_aclnn},
constexpr OpRow kOpTable[] = {OAO_SCHEMA_OPS(OAO_OP_ROW)};
#undef OAO_OP_ROW

// Built once and never changed: ORT keeps pointers to the ops and the domain for as long as any
// session lives, and every session registering the library shares them.
// The library's ops, and ONNX's standard ops on the NPU in a domain of their own (aclnn/standard:
// on the CPU their nodes run as the standard ops their functions hold).
struct Library {
  OpList ops, standard_ops;
  Ort::CustomOpDomain domain{schema::kDomain};
  Ort::CustomOpDomain standard_domain{standard::kAclnnDomain};

  Library() {
    for (const OpRow& row : kOpTable) {
      if (kWithCpuKernels) row.cpu(ops);  // ep.cc: false in the aclnn-on-CPU test build
      row.aclnn(ops);
    }
    for (auto& op : ops) domain.Add(op.get());
    standard::add_standard_ops(standard_ops, kAclnnEp);
    for (auto& op : standard_ops) standard_domain.Add(op.get());
  }
};

}  // namespace
}  // namespace oao

extern "C" __attribute__((visibility("default"))) OrtStatus* ORT_API_CALL
RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* api_base) {
  const OrtApi* api = api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr) {
    return api_base->GetApi(1)->CreateStatus(
        ORT_FAIL, "ort_ascend_ops needs ONNX Runtime 1.21 or newer (C API version 21)");
  }
  Ort::InitApi(api);
  try {
    static const oao::Library library;
    Ort::UnownedSessionOptions(options).Add(library.domain);
    Ort::UnownedSessionOptions(options).Add(library.standard_domain);
    return nullptr;
  } catch (const std::exception& e) {
    return api->CreateStatus(ORT_FAIL, (std::string("ort_ascend_ops: ") + e.what()).c_str());
  }
}
