// The execution providers the kernels register for. Kept apart from glue.h (and ONNX Runtime's
// headers) so that ep.cc, the one file compiled differently per custom-op library, stays trivial.
#pragma once

namespace oao {

inline constexpr const char* kCpu = "CPUExecutionProvider";

// Defined in ep.cc, once per library: CANN's EP and the CPU kernels too in ort_ascend_ops, the CPU
// EP and no CPU kernels in ort_ascend_ops_aclnn_on_cpu (the test build that runs the aclnn kernels
// against the host emulator).
extern const char* const kAclnnEp;
extern const bool kWithCpuKernels;

}  // namespace oao
