// libopapi_nn.so: aclnnApplyAdamWV2 (amsgrad off and on), varRef, mRef and vRef updated in place
// by the page's formula in float32.
#include <cmath>
#include <type_traits>

#include "op.h"
#include "tensor.h"

namespace {

using namespace aclemu;

Plan apply_adam_w(aclTensor* var_p, aclTensor* m_p, aclTensor* v_p, aclTensor* max_p, const aclTensor* grad_p,
                  const aclTensor* step_p, float lr, float beta1, float beta2, float weight_decay, float eps,
                  bool amsgrad, bool maximize) {
  const aclTensor& var = need(var_p, "varRef");
  const aclTensor& m = need(m_p, "mRef");
  const aclTensor& v = need(v_p, "vRef");
  const aclTensor& grad = need(grad_p, "grad");
  const aclTensor& step = need(step_p, "step");
  if (amsgrad && max_p == nullptr) fail(kErrParamNullptr, "maxGradNormOptionalRef is required when amsgrad is true");
  check_dtype(var, "varRef", {ACL_FLOAT, ACL_FLOAT16, ACL_BF16});
  check_same_dtype(m, "mRef", var, "varRef");
  check_same_dtype(v, "vRef", var, "varRef");
  check_same_dtype(grad, "grad", var, "varRef");
  check_dtype(step, "step", {ACL_INT64, ACL_FLOAT});
  if (product() == Product::kOther || product() == Product::k310P) fail_product();
  check_rank(var, "varRef", 1, 8);
  check_shape(m, "mRef", var.dims, "varRef's shape");
  check_shape(v, "vRef", var.dims, "varRef's shape");
  check_shape(grad, "grad", var.dims, "varRef's shape");
  check_shape(step, "step", {1}, "shape (1,)");
  if (max_p != nullptr) {
    check_same_dtype(*max_p, "maxGradNormOptionalRef", var, "varRef");
    check_shape(*max_p, "maxGradNormOptionalRef", var.dims, "varRef's shape");
  }
  std::vector<const aclTensor*> ins{var_p, m_p, v_p, grad_p, step_p}, outs{var_p, m_p, v_p};
  if (max_p != nullptr && amsgrad) ins.push_back(max_p), outs.push_back(max_p);
  auto compute = [=] {
    const float t = step.dtype == ACL_INT64 ? static_cast<float>(read_ints(*step_p)[0]) : read_floats(*step_p)[0];
    std::vector<float> theta = read_floats(*var_p), mt = read_floats(*m_p), vt = read_floats(*v_p);
    const std::vector<float> g = read_floats(*grad_p);
    std::vector<float> vmax = amsgrad ? read_floats(*max_p) : std::vector<float>();
    const float correction1 = 1.f - std::pow(beta1, t), correction2 = 1.f - std::pow(beta2, t);
    for (size_t i = 0; i < theta.size(); ++i) {
      const float gi = maximize ? -g[i] : g[i];
      mt[i] = beta1 * mt[i] + (1.f - beta1) * gi;
      vt[i] = beta2 * vt[i] + (1.f - beta2) * gi * gi;
      float v_used = vt[i];
      if (amsgrad) v_used = vmax[i] = std::fmax(vmax[i], vt[i]);
      const float m_hat = mt[i] / correction1, v_hat = v_used / correction2;
      theta[i] = theta[i] - lr / (std::sqrt(v_hat) + eps) * m_hat - lr * weight_decay * theta[i];
    }
    write_floats(*var_p, theta);
    write_floats(*m_p, mt);
    write_floats(*v_p, vt);
    if (amsgrad) write_floats(*max_p, vmax);
  };
  return Plan{ins, outs, compute};
}

}  // namespace

ACLEMU_API aclnnStatus aclnnApplyAdamWV2GetWorkspaceSize(aclTensor* varRef, aclTensor* mRef, aclTensor* vRef,
                                                         aclTensor* maxGradNormOptionalRef, const aclTensor* grad,
                                                         const aclTensor* step, float lr, float beta1, float beta2,
                                                         float weightDecay, float eps, bool amsgrad, bool maximize,
                                                         uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnApplyAdamWV2GetWorkspaceSize", "aclnnApplyAdamWV2", workspaceSize, executor, [&] {
    return apply_adam_w(varRef, mRef, vRef, maxGradNormOptionalRef, grad, step, lr, beta1, beta2, weightDecay, eps,
                        amsgrad, maximize);
  });
}

ACLEMU_API aclnnStatus aclnnApplyAdamWV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                         aclrtStream stream) {
  return launch("aclnnApplyAdamWV2", workspace, workspaceSize, executor, stream);
}

static_assert(std::is_same_v<decltype(&aclnnApplyAdamWV2GetWorkspaceSize), oao::acl::ApplyAdamWPrepare>);
static_assert(std::is_same_v<decltype(&aclnnApplyAdamWV2), oao::acl::Launch>);
