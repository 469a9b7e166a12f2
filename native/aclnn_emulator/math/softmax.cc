// libopapi_math.so: the softmax family's functions (native/aclnn/standard/softmax.cc calls them):
// aclnnSoftmax, aclnnLogSoftmax, aclnnNLLLoss, aclnnNLLLoss2d, and aclnnInplaceOne for the losses'
// default weights. Each checks what its page and the ops-nn op_api source check for Atlas A2/A3
// (activation/softmax_v2, loss/nll_loss, math/ones_like), in the same order and with the same
// codes: 161001 for a NULL tensor, 161002 for every dtype, shape and attribute rule. A target
// outside [0, C) that is not ignoreIndex has no defined result on the device: here it fails the
// stream's work (the runtime's kernel fault), as an out-of-bounds read would.
#include <cmath>
#include <limits>
#include <type_traits>

#include "aclnn/standard/matmul_abi.h"
#include "math/common.h"

namespace {

using namespace aclemu;
using namespace aclemu::math;

// The A2/A3 tables also list DOUBLE (run on the AI CPU); the emulator stores no doubles.
constexpr std::initializer_list<aclDataType> kSoftmaxTypes = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
constexpr std::initializer_list<aclDataType> kTargetTypes = {ACL_INT64, ACL_UINT8, ACL_INT32};
constexpr size_t kMaxSoftmaxRank = 8;

[[noreturn]] void invalid(const std::string& message) { fail(kErrParamInvalid, message); }

// Softmax (log_softmax: its log) of `self` along `dim` into `out`.
Plan softmax(const aclTensor* self_p, int64_t dim, const aclTensor* out_p, bool log) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& out = need(out_p, "out");
  // aclnnSoftmax returns before any other check on an empty self; aclnnLogSoftmax checks first.
  if (!log && numel(self) == 0) return {{self_p}, {out_p}, [] {}};
  const auto rank = static_cast<int64_t>(self.dims.size());
  const auto check_dim = [dim, rank] {
    const int64_t axes = std::max<int64_t>(rank, 1);  // a 0-D self takes dim 0 or -1
    if (dim < -axes || dim >= axes) {
      invalid("dim " + std::to_string(dim) + " is outside the range of self's " + std::to_string(rank) +
              " axes");
    }
  };
  if (log) check_dim();  // aclnnLogSoftmax checks dim first, aclnnSoftmax after the dtypes
  check_dtype(self, "self", kSoftmaxTypes);
  check_dtype(out, "out", kSoftmaxTypes);
  if (!log) check_dim();
  if (self.dims.size() > kMaxSoftmaxRank) invalid("self has " + std::to_string(rank) + " axes, more than 8");
  if (out.dims != self.dims)
    invalid("out shape " + shape_text(out.dims) + " is not self's " + shape_text(self.dims));
  const int64_t axis = rank == 0 ? 0 : (dim < 0 ? dim + rank : dim);
  auto compute = [self_p, out_p, axis, log] {
    std::vector<double> x = read(*self_p);
    const std::vector<int64_t>& dims = self_p->dims;
    const int64_t length = dims.empty() ? 1 : dims[axis];
    int64_t inner = 1;
    for (size_t k = axis + 1; k < dims.size(); ++k) inner *= dims[k];
    const int64_t outer = length * inner == 0 ? 0 : static_cast<int64_t>(x.size()) / (length * inner);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        double* row = x.data() + o * length * inner + i;
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t c = 0; c < length; ++c) top = std::max(top, row[c * inner]);
        double sum = 0;
        for (int64_t c = 0; c < length; ++c) sum += std::exp(row[c * inner] - top);
        for (int64_t c = 0; c < length; ++c) {
          const double shifted = row[c * inner] - top;
          row[c * inner] = log ? shifted - std::log(sum) : std::exp(shifted) / sum;
        }
      }
    }
    write(*out_p, x);
  };
  return {{self_p}, {out_p}, compute};
}

// What the two NLL functions share once their shapes are checked: self viewed as [N, C, S]
// (S the spatial positions), the target as [N, S].
struct NllShape {
  int64_t n, c, s;
};

void check_nll_types(const aclTensor& self, const aclTensor& target, const aclTensor& weight,
                     const aclTensor& out, const aclTensor& total, bool weight_first) {
  if (weight_first) check_same_dtype(weight, "weight", self, "self");
  check_dtype(self, "self", kFloatTypes);
  if (!weight_first) check_same_dtype(weight, "weight", self, "self");
  check_dtype(out, "out", kFloatTypes);
  check_dtype(total, "totalWeightOut", kFloatTypes);
  check_dtype(target, "target", kTargetTypes);
}

void check_reduction(int64_t reduction) {
  if (reduction < 0 || reduction > 2) invalid("reduction " + std::to_string(reduction) + " is not 0, 1 or 2");
}

// l = -weight[t] * x[n, t, s] for each target t that is not ignore_index; reduction 0 writes
// them, 1 their sum over the weights taken, 2 their sum; total_weight gets that weight for 1, 2.
Plan nll(const aclTensor* self, const aclTensor* target, const aclTensor* weight, int64_t reduction,
         int64_t ignore_index, const aclTensor* out, const aclTensor* total, NllShape shape, bool empty) {
  auto compute = [=] {
    std::vector<double> losses(static_cast<size_t>(shape.n * shape.s), 0.0);
    double loss_sum = 0, weight_sum = 0;
    if (!empty) {
      const std::vector<double> x = read(*self), w = read(*weight);
      const std::vector<int64_t> t = read_ints(*target);
      for (int64_t n = 0; n < shape.n; ++n) {
        for (int64_t s = 0; s < shape.s; ++s) {
          const int64_t label = t[n * shape.s + s];
          if (label == ignore_index) continue;
          if (label < 0 || label >= shape.c) {
            fail(kErrRuntime, "target " + std::to_string(label) + " at position " +
                                  std::to_string(n * shape.s + s) + " is outside [0, " +
                                  std::to_string(shape.c) + ") and is not ignoreIndex " +
                                  std::to_string(ignore_index));
          }
          const double loss = -w[label] * x[(n * shape.c + label) * shape.s + s];
          losses[n * shape.s + s] = loss;
          loss_sum += loss;
          weight_sum += w[label];
        }
      }
    }
    if (reduction == 0) {
      if (!empty) write(*out, losses);
      return;
    }
    write(*out, {reduction == 1 ? loss_sum / weight_sum : loss_sum});
    write(*total, {weight_sum});
  };
  return {{self, target, weight}, {out, total}, compute};
}

Plan nll_loss(const aclTensor* self_p, const aclTensor* target_p, const aclTensor* weight_p,
              int64_t reduction, int64_t ignore_index, const aclTensor* out_p, const aclTensor* total_p) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& target = need(target_p, "target");
  const aclTensor& weight = need(weight_p, "weight");
  const aclTensor& out = need(out_p, "out");
  const aclTensor& total = need(total_p, "totalWeightOut");
  check_nll_types(self, target, weight, out, total, true);
  check_reduction(reduction);
  const size_t rank = self.dims.size();
  if (rank < 1 || rank > 2) invalid("self " + shape_text(self.dims) + " must have 1 or 2 axes");
  if (target.dims.size() > 1) invalid("target " + shape_text(target.dims) + " must have 0 or 1 axes");
  const bool batched = rank == 2 && target.dims.size() == 1 && target.dims[0] == self.dims[0];
  if (!(rank == 1 && target.dims.empty()) && !batched) {
    invalid("self " + shape_text(self.dims) + " takes target " + (rank == 1 ? "[]" : "[N]") + ", not " +
            shape_text(target.dims));
  }
  const int64_t classes = self.dims.back();
  if (weight.dims != std::vector<int64_t>{classes}) {
    invalid("weight " + shape_text(weight.dims) + " must be [" + std::to_string(classes) + "]");
  }
  if (reduction == 0 && rank == 2) {
    if (out.dims != std::vector<int64_t>{self.dims[0]}) {
      invalid("out " + shape_text(out.dims) + " must be [" + std::to_string(self.dims[0]) + "]");
    }
  } else if (out.dims.size() > 1 || numel(out) != 1) {
    invalid("out " + shape_text(out.dims) + " must hold a single element");
  }
  if (numel(total) != 1) invalid("totalWeightOut " + shape_text(total.dims) + " must be [1]");
  if (numel(self) == 0 && classes == 0 && numel(target) > 0)
    invalid("target is out of bounds: self has no classes");
  const NllShape shape{rank == 2 ? self.dims[0] : 1, classes, 1};
  return nll(self_p, target_p, weight_p, reduction, ignore_index, out_p, total_p, shape, numel(self) == 0);
}

Plan nll_loss_2d(const aclTensor* self_p, const aclTensor* target_p, const aclTensor* weight_p,
                 int64_t reduction, int64_t ignore_index, const aclTensor* out_p, const aclTensor* total_p) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& target = need(target_p, "target");
  const aclTensor& weight = need(weight_p, "weight");
  const aclTensor& out = need(out_p, "out");
  const aclTensor& total = need(total_p, "totalWeightOut");
  check_nll_types(self, target, weight, out, total, false);
  check_reduction(reduction);
  if (self.dims.size() != 4) invalid("self " + shape_text(self.dims) + " must have 4 axes [N, C, H, W]");
  const int64_t classes = self.dims[1];
  if (weight.dims.empty() || weight.dims[0] != classes) {
    invalid("weight " + shape_text(weight.dims) + " must be [" + std::to_string(classes) + "] (self's C)");
  }
  if (target.dims.size() != 3) invalid("target " + shape_text(target.dims) + " must have 3 axes [N, H, W]");
  if (target.dims[0] != self.dims[0] || target.dims[1] != self.dims[2] || target.dims[2] != self.dims[3]) {
    invalid("target " + shape_text(target.dims) + " does not match self " + shape_text(self.dims));
  }
  if (reduction == 0) {
    if (out.dims != target.dims) {
      invalid("out " + shape_text(out.dims) + " must be target's " + shape_text(target.dims));
    }
  } else if (numel(out) != 1) {
    invalid("out " + shape_text(out.dims) + " must be [1]");
  }
  if (numel(total) != 1) invalid("totalWeightOut " + shape_text(total.dims) + " must be [1]");
  const bool empty = numel(self) == 0 || numel(target) == 0 || numel(weight) == 0;
  const NllShape shape{self.dims[0], classes, self.dims[2] * self.dims[3]};
  return nll(self_p, target_p, weight_p, reduction, ignore_index, out_p, total_p, shape, empty);
}

Plan inplace_one(const aclTensor* self_p) {
  const aclTensor& self = need(self_p, "selfRef");
  check_dtype(self, "selfRef",
              {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT8, ACL_INT32, ACL_INT64, ACL_UINT8, ACL_BOOL});
  auto compute = [self_p] { write(*self_p, std::vector<double>(static_cast<size_t>(numel(*self_p)), 1.0)); };
  return {{}, {self_p}, compute};
}

}  // namespace

ACLEMU_TWO_PHASES(aclnnSoftmax,
                  (const aclTensor* self, int64_t dim, const aclTensor* out, uint64_t* workspaceSize,
                   aclOpExecutor** executor),
                  softmax(self, dim, out, false))
static_assert(std::is_same_v<decltype(&aclnnSoftmaxGetWorkspaceSize), oao::acl::SoftmaxPrepare>);

ACLEMU_TWO_PHASES(aclnnLogSoftmax,
                  (const aclTensor* self, int64_t dim, const aclTensor* out, uint64_t* workspaceSize,
                   aclOpExecutor** executor),
                  softmax(self, dim, out, true))
static_assert(std::is_same_v<decltype(&aclnnLogSoftmaxGetWorkspaceSize), oao::acl::SoftmaxPrepare>);

ACLEMU_TWO_PHASES(aclnnNLLLoss,
                  (const aclTensor* self, const aclTensor* target, const aclTensor* weight, int64_t reduction,
                   int64_t ignoreIndex, const aclTensor* out, const aclTensor* totalWeightOut,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  nll_loss(self, target, weight, reduction, ignoreIndex, out, totalWeightOut))
static_assert(std::is_same_v<decltype(&aclnnNLLLossGetWorkspaceSize), oao::acl::NllLossPrepare>);

ACLEMU_TWO_PHASES(aclnnNLLLoss2d,
                  (const aclTensor* self, const aclTensor* target, const aclTensor* weight, int64_t reduction,
                   int64_t ignoreIndex, const aclTensor* out, const aclTensor* totalWeightOut,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  nll_loss_2d(self, target, weight, reduction, ignoreIndex, out, totalWeightOut))
static_assert(std::is_same_v<decltype(&aclnnNLLLoss2dGetWorkspaceSize), oao::acl::NllLossPrepare>);

ACLEMU_TWO_PHASES(aclnnInplaceOne,
                  (const aclTensor* selfRef, uint64_t* workspaceSize, aclOpExecutor** executor),
                  inplace_one(selfRef))
static_assert(std::is_same_v<decltype(&aclnnInplaceOneGetWorkspaceSize), oao::acl::InplaceOnePrepare>);
