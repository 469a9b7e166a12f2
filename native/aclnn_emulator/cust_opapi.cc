// libcust_opapi.so: stands for an old custom operator package whose aclnnLightningIndexer has
// the older signature (no preTokens, nextTokens, returnValues or values output). The symbol
// names match the current ones, so only the library they came from tells them apart; any call
// means the caller bound the wrong one.
#include <string>

#include "emulator.h"

namespace {

aclnnStatus refuse(const char* symbol, const char* name) {
  if (aclnnStatus injected = aclemu::hooks().enter(symbol)) return injected;
  aclemu::hooks().set_error(
      std::string(name) +
      ": this custom package has the old LightningIndexer signature, which the emulator does not run");
  return oao::acl::kErrInner;
}

}  // namespace

ACLEMU_API aclnnStatus aclnnLightningIndexerGetWorkspaceSize(const aclTensor*, const aclTensor*,
                                                             const aclTensor*, const aclTensor*,
                                                             const aclTensor*, const aclTensor*, char*, char*,
                                                             int64_t, int64_t, const aclTensor*, uint64_t*,
                                                             aclOpExecutor**) {
  return refuse("libcust_opapi:aclnnLightningIndexerGetWorkspaceSize",
                "aclnnLightningIndexerGetWorkspaceSize");
}

ACLEMU_API aclnnStatus aclnnLightningIndexer(void*, uint64_t, aclOpExecutor*, aclrtStream) {
  return refuse("libcust_opapi:aclnnLightningIndexer", "aclnnLightningIndexer");
}
