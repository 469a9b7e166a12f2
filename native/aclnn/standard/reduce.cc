// Reductions, CumSum, ArgMax and TopK: each one aclnn call (ReduceProd one per axis) on the node's
// own tensors. ONNX's axes, K and axis inputs are host inputs (initializers once a session's shapes
// are folded); what ONNX defines and the vendor's functions do not take (an identity over empty
// axes, empty reductions, ArgMax's select_last_index) is done here or refused naming the rule,
// before any vendor call.
#include <string>

#include "aclnn/standard/reduce_abi.h"
#include "aclnn/standard/rows.h"

namespace oao::standard {
namespace {

// The axes a reduction runs over, in [0, rank): its axes input (negative ones from the end), or,
// when that is absent or empty, every axis, unless noop_with_empty_axes makes it none.
std::vector<int64_t> reduce_axes(Call& call, size_t rank) {
  std::vector<int64_t> axes;
  if (call.has_input(1)) {
    for (const int64_t value : call.host_ints(1)) axes.push_back(call.axis(value, rank, "axes value"));
  }
  if (axes.empty() && call.attribute_int("noop_with_empty_axes", 0) == 0) {
    for (size_t k = 0; k < rank; ++k) axes.push_back(static_cast<int64_t>(k));
  }
  // A scalar has no axis to reduce: Call::axis lets 0 through for it, as the vendor does.
  if (rank == 0) axes.clear();
  std::vector<bool> seen(rank, false);
  for (const int64_t axis : axes) {
    if (seen[axis]) {
      throw Ort::Exception("axis " + std::to_string(axis) + " appears twice in axes", ORT_INVALID_ARGUMENT);
    }
    seen[axis] = true;
  }
  return axes;
}

bool contains(const std::vector<int64_t>& axes, size_t k) {
  for (const int64_t axis : axes)
    if (axis == static_cast<int64_t>(k)) return true;
  return false;
}

// The shape of x reduced over `axes`: each kept as 1, or dropped.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes, bool keep) {
  Shape out;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (!contains(axes, k)) {
      out.push_back(shape[k]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  return out;
}

// No axes to reduce (noop_with_empty_axes, or a scalar): ONNX's identity, which none of the vendor's
// functions is, as a copy into the output; false when there are axes.
bool copied_as_identity(Call& call, const Tensor& x, const std::vector<int64_t>& axes) {
  if (!axes.empty()) return false;
  call.aclnn().copy_on_stream(call.output(0, x.shape), x.data, x.bytes());
  return true;
}

enum class Reduction { kSum, kMean, kMax, kMin, kL2 };

template <Reduction kReduction>
Ort::Status reduce(Call& call) {
  const Tensor x = call.input(0);
  const std::vector<int64_t> axes = reduce_axes(call, x.shape.size());
  const bool keep = call.attribute_int("keepdims", 1) != 0;
  const ONNXTensorElementDataType type = call.output_type(0);
  if (copied_as_identity(call, x, axes)) return Ort::Status(nullptr);
  const Shape shape = reduced_shape(x.shape, axes, keep);
  if (kReduction == Reduction::kMax || kReduction == Reduction::kMin) {
    // ONNX gives -inf (+inf) over no values; aclnnAmax and aclnnAmin refuse a reduced axis of size 0.
    for (const int64_t axis : axes) {
      if (x.shape[axis] == 0 && element_count(shape) > 0) {
        return call.error("axis " + std::to_string(axis) + " of input " + shape_str(x.shape) +
                          " has size 0: the NPU's max and min take no empty reduction");
      }
    }
  }
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  // An empty x reduces to the vendor's fill (sum 0, mean NaN), which is ONNX's value too.
  const aclTensor* self = call.tensor(x);
  const aclIntArray* dims = call.aclnn().int_array(axes);
  const aclTensor* out = call.tensor(y, shape, type);
  switch (kReduction) {
    case Reduction::kSum:
      // float16 and bfloat16 accumulate in float32 on the device (the vendor's ReduceSum kernel).
      return call.aclnn().run<acl::ReduceDtypePrepare>("aclnnReduceSum", self, dims, keep, acl_type_of(type),
                                                       out);
    case Reduction::kMean:
      return call.aclnn().run<acl::ReduceDtypePrepare>("aclnnMean", self, dims, keep, acl_type_of(type), out);
    case Reduction::kMax:
      return call.aclnn().run<acl::ReducePrepare>("aclnnAmax", self, dims, keep, out);
    case Reduction::kMin:
      return call.aclnn().run<acl::ReducePrepare>("aclnnAmin", self, dims, keep, out);
    case Reduction::kL2:
      // torch.linalg.vector_norm's call on the NPU (clip_grad_norm_'s norms); float16 and bfloat16
      // accumulate in float32 on the device.
      return call.aclnn().run<acl::NormPrepare>("aclnnNorm", self, call.aclnn().scalar(2.0, ACL_FLOAT), dims,
                                                keep, out);
  }
  return Ort::Status(nullptr);
}

// ReduceProd: aclnnProdDim takes one axis, so each axis of `axes` in turn, kept as 1, into scratch
// (float32 for the float types, which the device multiplies in, so that only the last product
// rounds to the node's type), the last into the output seen with its axes kept: dropping them
// moves no element. A product over no values is 1 (ONNX's, and torch.prod's on the NPU).
Ort::Status reduce_prod(Call& call) {
  const Tensor x = call.input(0);
  const std::vector<int64_t> axes = reduce_axes(call, x.shape.size());
  const bool keep = call.attribute_int("keepdims", 1) != 0;
  const ONNXTensorElementDataType type = call.output_type(0);
  if (copied_as_identity(call, x, axes)) return Ort::Status(nullptr);
  void* y = call.output(0, reduced_shape(x.shape, axes, keep));
  const Shape kept = reduced_shape(x.shape, axes, true);
  if (element_count(kept) == 0) return Ort::Status(nullptr);
  const ONNXTensorElementDataType between = (type == kI32 || type == kI64) ? type : kF32;
  const void* from = x.data;
  Shape shape = x.shape;
  ONNXTensorElementDataType from_type = x.type;
  for (size_t i = 0; i < axes.size(); ++i) {
    const bool last = i + 1 == axes.size();
    Shape next = shape;
    next[axes[i]] = 1;
    const ONNXTensorElementDataType to = last ? type : between;
    void* into = last ? y : call.aclnn().scratch(static_cast<size_t>(element_count(next)) * type_size(to));
    Ort::Status status =
        call.aclnn().run<acl::ProdDimPrepare>("aclnnProdDim", call.tensor(from, shape, from_type), axes[i],
                                              true, acl_type_of(to), call.tensor(into, next, to));
    if (!status.IsOK()) return status;
    from = into;
    shape = next;
    from_type = to;
  }
  return Ort::Status(nullptr);
}

// A host input that must hold one integer (CumSum's axis, TopK's K).
int64_t host_int(Call& call, size_t i, const char* what) {
  const std::vector<int64_t> values = call.host_ints(i);
  if (values.size() != 1) {
    throw Ort::Exception(
        std::string("input '") + what + "' " + shape_str(call.input(i).shape) + " must hold one value",
        ORT_INVALID_ARGUMENT);
  }
  return values[0];
}

// aclnnCumsum has no exclusive or reverse; aclnnCumsumV2 has both. The plain case keeps to
// aclnnCumsum, which older CANN releases without V2 also have.
Ort::Status cumsum(Call& call) {
  const Tensor x = call.input(0);
  const int64_t axis = call.axis(host_int(call, 1, "axis"), x.shape.size(), "axis");
  const bool exclusive = call.attribute_int("exclusive", 0) != 0;
  const bool reverse = call.attribute_int("reverse", 0) != 0;
  const ONNXTensorElementDataType type = call.output_type(0);
  void* y = call.output(0, x.shape);
  if (x.count() == 0) return Ort::Status(nullptr);
  const aclTensor* out = call.tensor(y, x.shape, type);
  if (!exclusive && !reverse) {
    return call.aclnn().run<acl::CumsumPrepare>("aclnnCumsum", call.tensor(x), axis, acl_type_of(type), out);
  }
  return call.aclnn().run<acl::CumsumV2Prepare>("aclnnCumsumV2", call.tensor(x), axis, exclusive, reverse,
                                                out);
}

Ort::Status argmax(Call& call) {
  const Tensor x = call.input(0);
  const int64_t axis = call.axis(call.attribute_int("axis", 0), x.shape.size(), "axis");
  const bool keep = call.attribute_int("keepdims", 1) != 0;
  if (call.attribute_int("select_last_index", 0) != 0) {
    return call.error(
        "select_last_index=1 is not supported: aclnnArgMax gives the first index of the maximum");
  }
  const Shape shape = x.shape.empty() ? Shape{} : reduced_shape(x.shape, {axis}, keep);
  if (!x.shape.empty() && x.shape[axis] == 0 && element_count(shape) > 0) {
    return call.error("axis " + std::to_string(axis) + " of input " + shape_str(x.shape) +
                      " has size 0: there is no maximum to index");
  }
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  return call.aclnn().run<acl::ArgMaxPrepare>("aclnnArgMax", call.tensor(x), axis, keep,
                                              call.tensor(y, shape, kI64));
}

Ort::Status topk(Call& call) {
  const Tensor x = call.input(0);
  if (x.shape.empty()) return call.error("input 'X' must have at least one axis");
  const int64_t axis = call.axis(call.attribute_int("axis", -1), x.shape.size(), "axis");
  const int64_t k = host_int(call, 1, "K");
  if (k < 0 || k > x.shape[axis]) {
    return call.error("K " + std::to_string(k) + " is outside [0, " + std::to_string(x.shape[axis]) +
                      "], the size of axis " + std::to_string(axis) + " of input " + shape_str(x.shape));
  }
  const bool largest = call.attribute_int("largest", 1) != 0;
  Shape shape = x.shape;
  shape[axis] = k;
  void* values = call.output(0, shape);
  void* indices = call.output(1, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  // ONNX's sorted=0 leaves the order open, and aclnnTopk takes only sorted=true: one such order.
  return call.aclnn().run<acl::TopkPrepare>("aclnnTopk", call.tensor(x), k, axis, largest, true,
                                            call.tensor(values, shape, call.output_type(0)),
                                            call.tensor(indices, shape, kI64));
}

}  // namespace

std::vector<Row> reduce_rows() {
  const Types max_min_types = {kF32, kF16, kBF16, kI32, kI64, kBool};
  // CumSum's axis: int32 or int64.
  const auto cumsum_signatures = with_index(kNumbers, {kI32, kI64});
  const auto topk_signatures = pairs(kNumbers, {kI64}, [](auto t, auto k) { return Types{t, k, t, kI64}; });
  return {
      Row{"ReduceSum", "aclnnReduceSum", reduce<Reduction::kSum>, 2, 1, with_index(kNumbers, {kI64})}
          .on_host({1})
          .optional_from(1),
      Row{"ReduceMean", "aclnnMean", reduce<Reduction::kMean>, 2, 1, with_index(kFloats, {kI64})}
          .on_host({1})
          .optional_from(1),
      Row{"ReduceMax", "aclnnAmax", reduce<Reduction::kMax>, 2, 1, with_index(max_min_types, {kI64})}
          .on_host({1})
          .optional_from(1),
      Row{"ReduceMin", "aclnnAmin", reduce<Reduction::kMin>, 2, 1, with_index(max_min_types, {kI64})}
          .on_host({1})
          .optional_from(1),
      Row{"ReduceL2", "aclnnNorm", reduce<Reduction::kL2>, 2, 1, with_index(kFloats, {kI64})}
          .on_host({1})
          .optional_from(1),
      Row{"ReduceProd", "aclnnProdDim", reduce_prod, 2, 1, with_index(kNumbers, {kI64})}
          .on_host({1})
          .optional_from(1),
      Row{"CumSum", "aclnnCumsum, aclnnCumsumV2", cumsum, 2, 1, cumsum_signatures}.on_host({1}),
      {"ArgMax", "aclnnArgMax", argmax, 1, 1, typed(kNumbers, 1, {}, {kI64})},
      Row{"TopK", "aclnnTopk", topk, 2, 2, topk_signatures}.on_host({1}),
  };
}

}  // namespace oao::standard
