// libopapi_transformer.so (ops-transformer's gmm/): aclnnGroupedMatmulV4 for single tensors without
// bias, quantization or activation (splitItem 2/3; the rows grouped, groupType 0, or the contraction
// axis, groupType 2), and aclnnGroupedMatmulAddV2. Products are summed in double from the pages'
// formulas and rounded to the output's type once. The emulator refuses empty tensors, where the
// vendor's first phase returns an executor that writes nothing.
#include <algorithm>
#include <climits>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "op.h"
#include "tensor.h"

namespace {

using namespace aclemu;

constexpr int64_t kMaxGroups = 1024, kMaxLastAxis = 65536;

// The vendor's transposed matrix (gmm::IsTransposeLastTwoDims): the last two axes swapped in
// memory over an otherwise contiguous tensor. `special`: its CheckSpecialTranspose, which does not
// call a 1 x 1 matrix transposed.
bool transposed(const aclTensor& t, bool special) {
  const size_t r = t.dims.size();
  if (r < 2 || t.strides[r - 2] != 1 || t.strides[r - 1] != t.dims[r - 2]) return false;
  int64_t block = t.dims[r - 1] * t.dims[r - 2];
  for (size_t b = r - 2; b-- > 0;) {
    if (t.strides[b] != block) return false;
    block *= t.dims[b];
  }
  return !(special && block == 1);
}

std::string name_of(const char* list) { return std::string(list) + "[0]"; }

// The one tensor of a single-tensor list; multi-tensor lists are not emulated.
const aclTensor& single(const aclTensorList* list, const char* name) {
  if (list == nullptr) fail(kErrParamNullptr, std::string(name) + " is NULL");
  if (!hooks().is_live(Kind::kTensorList, list)) {
    fail(kErrParamInvalid, std::string(name) + " is not a live aclTensorList");
  }
  if (list->tensors.size() != 1) {
    fail(kErrParamInvalid, std::string(name) + " holds " + std::to_string(list->tensors.size()) +
                               " tensors; the emulator has the single-tensor case only");
  }
  return need(list->tensors[0], name_of(name).c_str());
}

void absent(const aclTensorList* list, const char* name) {
  if (list != nullptr && !list->tensors.empty()) {
    fail(kErrParamInvalid, std::string(name) + " is given; the emulator has no bias, quantization or activation");
  }
}

void check_not_empty(const aclTensor& t, const char* name) {
  if (numel(t) == 0) fail(kErrParamInvalid, std::string(name) + " is empty (the vendor would compute nothing)");
}

// Every axis under INT32_MAX once rounded up to 32 bytes.
void check_axes(const aclTensor& t, const char* name) {
  const int64_t per_block = 32 / static_cast<int64_t>(element_size(t.dtype));
  for (int64_t d : t.dims) {
    if ((d + per_block - 1) / per_block * per_block >= INT32_MAX) {
      fail(kErrParamInvalid, std::string(name) + " axis of " + std::to_string(d) +
                                 " reaches INT32_MAX once aligned to 32 bytes");
    }
  }
}

// On A2/A3 the last axis of a matrix as the vendor reads it (the second last of a transposed one).
void check_last_axis(const aclTensor& t, const char* name, bool is_transposed) {
  if (product() == Product::k950) return;
  const int64_t last = is_transposed ? t.dims[t.dims.size() - 2] : t.dims.back();
  if (last >= kMaxLastAxis) {
    fail(kErrParamInvalid, std::string(name) + " last axis " + std::to_string(last) + " must be under 65536 on " +
                               "Atlas A2/A3 (SoC " + soc_name() + ")");
  }
}

// groupList's checks; returns the number of groups.
int64_t check_group_list(const aclTensor& list, int64_t list_type) {
  check_dtype(list, "groupList", {ACL_INT64});
  if (list.dims.size() != 1) fail(kErrParamInvalid, "groupList must have rank 1, not " + shape_text(list.dims));
  if (list_type != 0 && list_type != 1) {
    fail(kErrParamInvalid, "groupListType " + std::to_string(list_type) + " not supported here (0 or 1)");
  }
  if (list.dims[0] > kMaxGroups) {
    fail(kErrParamInvalid, "groupList holds " + std::to_string(list.dims[0]) + " groups; at most 1024");
  }
  return list.dims[0];
}

void check_groups(int64_t groups, const aclTensor& t, const char* name) {
  if (t.dims[0] != groups) {
    fail(kErrParamInvalid, "groupList holds " + std::to_string(groups) + " groups, " + name + " " +
                               std::to_string(t.dims[0]));
  }
}

// The groups' ends along the grouped axis, read on the device at launch: counts (type 1) or their
// cumulative sums (type 0), adding up to at most `total`; the kernel checks nothing, the emulator
// fails the stream instead.
std::vector<int64_t> group_ends(const aclTensor& list, int64_t list_type, int64_t total) {
  const std::vector<int64_t> values = read_ints(list);
  std::vector<int64_t> ends(values.size());
  int64_t end = 0;
  for (size_t g = 0; g < values.size(); ++g) {
    const int64_t next = list_type == 1 ? end + values[g] : values[g];
    if (next < end || next > total) {
      fail(kErrRuntime, "groupList value " + std::to_string(values[g]) + " of group " + std::to_string(g) +
                            (list_type == 1 ? " (counts)" : " (cumulative sums)") + " leaves [0, " +
                            std::to_string(total) + "] or goes back");
    }
    ends[g] = end = next;
  }
  return ends;
}

void check_product(const aclTensor& weight) {
  if (product() == Product::kOther) fail_product();
  if (product() == Product::k310P) {
    fail(kErrParamInvalid, "weight must be FRACTAL_NZ on Atlas inference products (SoC " + soc_name() +
                               "), not format " + std::to_string(static_cast<int>(weight.format)));
  }
}

// y[M, N], the rows of x [M, K] grouped, each group times its weight[g] [K, N]; rows past the last
// group are not written.
Plan rows_grouped(const aclTensor* x_p, const aclTensor* w_p, const aclTensor* list_p, int64_t list_type,
                  const aclTensor* y_p) {
  const aclTensor &x = *x_p, &w = *w_p, &y = *y_p;
  check_rank(x, "x[0]", 2, 2);
  check_rank(w, "weight[0]", 3, 3);
  if (transposed(x, true)) fail(kErrParamInvalid, "x[0] must not be transposed when groupType is 0");
  const int64_t m = x.dims[0], k = x.dims[1], n = w.dims[2];
  if (w.dims[1] != k) {
    fail(kErrParamInvalid, "weight[0] " + shape_text(w.dims) + " does not take x[0] " + shape_text(x.dims));
  }
  check_shape(y, "out[0]", {m, n}, "x's rows by weight's columns");
  check_groups(check_group_list(*list_p, list_type), w, "weight[0]");
  check_last_axis(x, "x[0]", false);
  check_last_axis(w, "weight[0]", transposed(w, false));
  auto compute = [x_p, w_p, list_p, list_type, y_p, m, k, n] {
    const std::vector<int64_t> ends = group_ends(*list_p, list_type, m);
    const std::vector<float> xv = read_floats(*x_p), wv = read_floats(*w_p);
    std::vector<float> yv = read_floats(*y_p);
    int64_t row = 0;
    std::vector<double> acc(static_cast<size_t>(n));
    for (size_t g = 0; g < ends.size(); ++g) {
      for (; row < ends[g]; ++row) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t i = 0; i < k; ++i) {
          const double a = xv[row * k + i];
          const float* wr = &wv[(static_cast<int64_t>(g) * k + i) * n];
          for (int64_t j = 0; j < n; ++j) acc[j] += a * wr[j];
        }
        for (int64_t j = 0; j < n; ++j) yv[row * n + j] = static_cast<float>(acc[j]);
      }
    }
    write_floats(*y_p, yv);
  };
  return Plan{{x_p, w_p, list_p}, {y_p}, compute};
}

// Per group g of the contraction axis (x [M, K], weight [K, N]): y[g] = x[:, group] @ weight[group, :],
// or with `add` y[g] + that (the Add function's yRef). V4's kernel writes zeros for a group of size
// 0 (ops-transformer's EmptyTensorCompute); positions past the last group are not read.
void contract_groups(const aclTensor* x_p, const aclTensor* w_p, const std::vector<int64_t>& ends,
                     const aclTensor* y_p, bool add) {
  const int64_t m = x_p->dims[0], k = x_p->dims[1], n = w_p->dims[1];
  const std::vector<float> xv = read_floats(*x_p), wv = read_floats(*w_p);
  std::vector<float> yv = add ? read_floats(*y_p) : std::vector<float>(static_cast<size_t>(numel(*y_p)));
  std::vector<double> acc(static_cast<size_t>(m * n));
  int64_t begin = 0;
  for (size_t g = 0; g < ends.size(); ++g) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t t = begin; t < ends[g]; ++t) {
      for (int64_t i = 0; i < m; ++i) {
        const double a = xv[i * k + t];
        for (int64_t j = 0; j < n; ++j) acc[i * n + j] += a * wv[t * n + j];
      }
    }
    float* out = &yv[static_cast<int64_t>(g) * m * n];
    for (int64_t e = 0; e < m * n; ++e) out[e] = static_cast<float>((add ? out[e] : 0.0) + acc[e]);
    begin = ends[g];
  }
  write_floats(*y_p, yv);
}

Plan contraction_grouped(const aclTensor* x_p, const aclTensor* w_p, const aclTensor* list_p, int64_t list_type,
                         const aclTensor* y_p) {
  const aclTensor &x = *x_p, &w = *w_p, &y = *y_p;
  check_rank(x, "x[0]", 2, 2);
  check_rank(w, "weight[0]", 2, 2);
  check_rank(y, "out[0]", 3, 3);
  if (!transposed(x, false)) fail(kErrParamInvalid, "x[0] must be transposed when groupType is 2");
  if (transposed(w, true)) fail(kErrParamInvalid, "weight[0] must not be transposed when groupType is 2");
  if (w.dims[0] != x.dims[1]) {
    fail(kErrParamInvalid, "weight[0] " + shape_text(w.dims) + " does not take x[0] " + shape_text(x.dims));
  }
  check_shape(y, "out[0]", {y.dims[0], x.dims[0], w.dims[1]}, "groups by x's rows by weight's columns");
  check_groups(check_group_list(*list_p, list_type), y, "out[0]");
  check_last_axis(x, "x[0]", true);
  check_last_axis(w, "weight[0]", false);
  auto compute = [x_p, w_p, list_p, list_type, y_p] {
    contract_groups(x_p, w_p, group_ends(*list_p, list_type, x_p->dims[1]), y_p, false);
  };
  return Plan{{x_p, w_p, list_p}, {y_p}, compute};
}

Plan grouped_matmul_v4(const aclTensorList* x_l, const aclTensorList* w_l,
                       std::initializer_list<const aclTensorList*> extras, const aclTensor* list_p, int64_t split_item,
                       int64_t group_type, int64_t list_type, int64_t act_type, const aclTensorList* y_l,
                       const aclTensorList* act_out, const aclTensorList* scale_out) {
  const aclTensor& x = single(x_l, "x");
  const aclTensor& w = single(w_l, "weight");
  const aclTensor& y = single(y_l, "out");
  for (const aclTensorList* extra : extras) absent(extra, "an optional input list");
  absent(act_out, "activationFeatureOutOptional");
  absent(scale_out, "dynQuantScaleOutOptional");
  if (list_p == nullptr) fail(kErrParamNullptr, "groupListOptional is NULL; single tensors need it");
  const aclTensor& list = need(list_p, "groupListOptional");
  check_dtype(x, "x[0]", {ACL_FLOAT16, ACL_BF16, ACL_FLOAT});
  check_same_dtype(w, "weight[0]", x, "x[0]");
  check_same_dtype(y, "out[0]", x, "x[0]");
  check_product(w);
  if (split_item != 2 && split_item != 3) {
    fail(kErrParamInvalid, "splitItem " + std::to_string(split_item) + ": single-tensor out needs 2 or 3");
  }
  if (act_type != 0) fail(kErrParamInvalid, "actType " + std::to_string(act_type) + ": activations need quantization");
  check_not_empty(x, "x[0]");
  check_not_empty(w, "weight[0]");
  check_axes(x, "x[0]");
  check_axes(w, "weight[0]");
  if (group_type == 0) return rows_grouped(&x, &w, &list, list_type, &y);
  if (group_type == 2) return contraction_grouped(&x, &w, &list, list_type, &y);
  fail(kErrParamInvalid, "groupType " + std::to_string(group_type) + " not supported here (0 or 2)");
}

Plan grouped_matmul_add_v2(const aclTensor* x_p, const aclTensor* w_p, const aclTensor* list_p, const aclTensor* y_p,
                           bool transpose_x, bool transpose_weight, int64_t group_type, int64_t list_type) {
  const aclTensor& x = need(x_p, "x");
  const aclTensor& w = need(w_p, "weight");
  const aclTensor& list = need(list_p, "groupList");
  const aclTensor& y = need(y_p, "yRef");
  check_dtype(x, "x", {ACL_FLOAT16, ACL_BF16});
  check_same_dtype(w, "weight", x, "x");
  check_dtype(y, "yRef", {ACL_FLOAT});
  if (product() == Product::kOther || product() == Product::k310P) fail_product();
  if (group_type != 2) fail(kErrParamInvalid, "groupType must be 2, not " + std::to_string(group_type));
  if (!transpose_x) fail(kErrParamInvalid, "transposeX must be true");
  if (transpose_weight) fail(kErrParamInvalid, "transposeWeight must be false");
  if (x.dims.size() != 2 || w.dims.size() != 2) fail(kErrParamInvalid, "x and weight must have rank 2");
  // Its x "must be transposed": the stored [K, M] of the formula's x_i [M, K], grouped along K.
  if (x.dims[0] != w.dims[0]) {
    fail(kErrParamInvalid, "x " + shape_text(x.dims) + " and weight " + shape_text(w.dims) + " differ in K");
  }
  const std::vector<int64_t> y_dims = {check_group_list(list, list_type), x.dims[1], w.dims[1]};
  if (y.dims != y_dims) {
    fail(kErrParamInvalid, "yRef " + shape_text(y.dims) + " must be [groups, M, N] = " + shape_text(y_dims));
  }
  check_not_empty(x, "x");
  check_not_empty(w, "weight");
  check_axes(x, "x");
  check_axes(w, "weight");
  check_last_axis(x, "x", false);  // M, the last axis of the stored [K, M]
  check_last_axis(w, "weight", false);
  auto compute = [x_p, w_p, list_p, list_type, y_p] {
    // Viewed as [M, K] with K contiguous, so contract_groups reads x[i][t] at i * K + t.
    aclTensor xt = *x_p;
    xt.dims = {x_p->dims[1], x_p->dims[0]};
    xt.strides = {x_p->strides[1], x_p->strides[0]};
    contract_groups(&xt, w_p, group_ends(*list_p, list_type, x_p->dims[0]), y_p, true);
  };
  return Plan{{x_p, w_p, list_p, y_p}, {y_p}, compute};
}

}  // namespace

ACLEMU_API aclnnStatus aclnnGroupedMatmulV4GetWorkspaceSize(
    const aclTensorList* x, const aclTensorList* weight, const aclTensorList* biasOptional,
    const aclTensorList* scaleOptional, const aclTensorList* offsetOptional,
    const aclTensorList* antiquantScaleOptional, const aclTensorList* antiquantOffsetOptional,
    const aclTensorList* perTokenScaleOptional, const aclTensor* groupListOptional,
    const aclTensorList* activationInputOptional, const aclTensorList* activationQuantScaleOptional,
    const aclTensorList* activationQuantOffsetOptional, int64_t splitItem, int64_t groupType, int64_t groupListType,
    int64_t actType, aclTensorList* out, aclTensorList* activationFeatureOutOptional,
    aclTensorList* dynQuantScaleOutOptional, uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnGroupedMatmulV4GetWorkspaceSize", "aclnnGroupedMatmulV4", workspaceSize, executor, [&] {
    return grouped_matmul_v4(x, weight,
                             {biasOptional, scaleOptional, offsetOptional, antiquantScaleOptional,
                              antiquantOffsetOptional, perTokenScaleOptional, activationInputOptional,
                              activationQuantScaleOptional, activationQuantOffsetOptional},
                             groupListOptional, splitItem, groupType, groupListType, actType, out,
                             activationFeatureOutOptional, dynQuantScaleOutOptional);
  });
}

ACLEMU_API aclnnStatus aclnnGroupedMatmulV4(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                            aclrtStream stream) {
  return launch("aclnnGroupedMatmulV4", workspace, workspaceSize, executor, stream);
}

ACLEMU_API aclnnStatus aclnnGroupedMatmulAddV2GetWorkspaceSize(const aclTensor* x, const aclTensor* weight,
                                                               const aclTensor* groupList, aclTensor* yRef,
                                                               bool transposeX, bool transposeWeight,
                                                               int64_t groupType, int64_t groupListType,
                                                               uint64_t* workspaceSize, aclOpExecutor** executor) {
  return prepare("aclnnGroupedMatmulAddV2GetWorkspaceSize", "aclnnGroupedMatmulAddV2", workspaceSize, executor, [&] {
    return grouped_matmul_add_v2(x, weight, groupList, yRef, transposeX, transposeWeight, groupType, groupListType);
  });
}

ACLEMU_API aclnnStatus aclnnGroupedMatmulAddV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                               aclrtStream stream) {
  return launch("aclnnGroupedMatmulAddV2", workspace, workspaceSize, executor, stream);
}

static_assert(std::is_same_v<decltype(&aclnnGroupedMatmulV4GetWorkspaceSize), oao::acl::GroupedMatmulV4Prepare>);
static_assert(std::is_same_v<decltype(&aclnnGroupedMatmulV4), oao::acl::Launch>);
static_assert(std::is_same_v<decltype(&aclnnGroupedMatmulAddV2GetWorkspaceSize), oao::acl::GroupedMatmulAddV2Prepare>);
static_assert(std::is_same_v<decltype(&aclnnGroupedMatmulAddV2), oao::acl::Launch>);
