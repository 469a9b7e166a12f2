// libopapi_nn.so: aclnnForeachNonFiniteCheckAndUnscale, every tensor of scaledGrads multiplied by
// invScale in float32 in place, and foundInf set to 1.0 where one holds an inf or a NaN.
#include <cmath>
#include <type_traits>

#include "op.h"
#include "tensor.h"

namespace {

using namespace aclemu;

constexpr size_t kMaxTensors = 256;

Plan non_finite_check_and_unscale(const aclTensorList* grads_p, const aclTensor* found_p, const aclTensor* inv_p) {
  if (grads_p == nullptr) fail(kErrParamNullptr, "scaledGrads is NULL");
  if (!hooks().is_live(Kind::kTensorList, grads_p)) fail(kErrParamInvalid, "scaledGrads is not a live aclTensorList");
  const aclTensor& found = need(found_p, "foundInf");
  const aclTensor& inv = need(inv_p, "invScale");
  check_dtype(found, "foundInf", {ACL_FLOAT});
  check_dtype(inv, "invScale", {ACL_FLOAT});
  const std::vector<const aclTensor*>& list = grads_p->tensors;
  if (list.empty() || list.size() > kMaxTensors) {
    fail(kErrTiling, "scaledGrads holds " + std::to_string(list.size()) + " tensors (1 to 256)");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = "scaledGrads[" + std::to_string(i) + "]";
    const aclTensor& g = need(list[i], name.c_str());
    check_dtype(g, name.c_str(), {ACL_FLOAT, ACL_FLOAT16, ACL_BF16});
    if (g.dtype != list[0]->dtype) fail(kErrTiling, name + " dtype differs from scaledGrads[0]'s");
    check_rank(g, name.c_str(), 0, 8);
    check_contiguous(g, name.c_str());
    if (numel(g) == 0) fail(kErrParamInvalid, name + " is empty (empty tensors are not supported)");
  }
  if (product() != Product::kA2 && product() != Product::kA3 && product() != Product::k950) fail_product();
  check_contiguous(found, "foundInf");
  if (numel(found) != 1) fail(kErrTiling, "foundInf must hold one element");
  if (numel(inv) != 1) fail(kErrTiling, "invScale must hold one element");
  std::vector<const aclTensor*> ins(list.begin(), list.end()), outs(list.begin(), list.end());
  ins.push_back(found_p), ins.push_back(inv_p), outs.push_back(found_p);
  auto compute = [list, found_p, inv_p] {
    const float inv_scale = read_floats(*inv_p)[0];
    bool any = false;
    for (const aclTensor* t : list) {
      std::vector<float> g = read_floats(*t);
      for (float& v : g) {
        any = any || !std::isfinite(v);
        v *= inv_scale;
      }
      write_floats(*t, g);
    }
    if (any) write_floats(*found_p, {1.f});
  };
  return Plan{ins, outs, compute};
}

}  // namespace

ACLEMU_API aclnnStatus aclnnForeachNonFiniteCheckAndUnscaleGetWorkspaceSize(const aclTensorList* scaledGrads,
                                                                            const aclTensor* foundInf,
                                                                            const aclTensor* invScale,
                                                                            uint64_t* workspaceSize,
                                                                            aclOpExecutor** executor) {
  return prepare("aclnnForeachNonFiniteCheckAndUnscaleGetWorkspaceSize", "aclnnForeachNonFiniteCheckAndUnscale",
                 workspaceSize, executor, [&] { return non_finite_check_and_unscale(scaledGrads, foundInf, invScale); });
}

ACLEMU_API aclnnStatus aclnnForeachNonFiniteCheckAndUnscale(void* workspace, uint64_t workspaceSize,
                                                            aclOpExecutor* executor, aclrtStream stream) {
  return launch("aclnnForeachNonFiniteCheckAndUnscale", workspace, workspaceSize, executor, stream);
}

static_assert(std::is_same_v<decltype(&aclnnForeachNonFiniteCheckAndUnscaleGetWorkspaceSize),
                             oao::acl::ForeachNonFiniteCheckAndUnscalePrepare>);
static_assert(std::is_same_v<decltype(&aclnnForeachNonFiniteCheckAndUnscale), oao::acl::Launch>);
