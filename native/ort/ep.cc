// What distinguishes the two custom-op libraries. Everything else, the registry included, is
// compiled once into the oao_glue object library both link; only this file is compiled per
// library, with OAO_ACLNN_ON_CPU in the test build (CMakeLists.txt).
#include "ort/ep.h"

namespace oao {

// The test build registers the aclnn kernels under the CPU EP, in place of the CPU kernels.
#ifdef OAO_ACLNN_ON_CPU
const char* const kAclnnEp = kCpu;
const bool kWithCpuKernels = false;
#else
const char* const kAclnnEp = "CANNExecutionProvider";
const bool kWithCpuKernels = true;
#endif

}  // namespace oao
