// Layout standard ops: views (Reshape, Squeeze, Unsqueeze, Flatten, Identity) keep the input's bytes
// and take no aclnn call; the rest compute ONNX's output shape on the host from the node's host
// inputs (shapes, axes, starts, pads: initializers once a session's shapes are folded) and hand the
// normalized values to one aclnn function. Every ONNX rule a node can break is refused here, naming
// the op, before any vendor call.
#include <algorithm>
#include <climits>
#include <cmath>

#include "aclnn/standard/layout_abi.h"
#include "aclnn/standard/rows.h"

namespace oao::standard {
namespace {

[[noreturn]] void refuse(const std::string& message) {
  throw Ort::Exception(message.c_str(), ORT_INVALID_ARGUMENT);
}

std::string list_str(const std::vector<int64_t>& values) { return shape_str(values); }

// The aclScalar type a host value of element type `type` travels as (the vendor's functions
// promote a scalar to self's type; float16 and bfloat16 values are exact in float32).
aclDataType scalar_type(ONNXTensorElementDataType type) {
  switch (type) {
    case kF32:
    case kF16:
    case kBF16:
      return ACL_FLOAT;
    case kBool:
      return ACL_BOOL;
    default:
      return ACL_INT64;
  }
}

// ---- Views: output 0 is input 0's bytes with another shape. ORT makes it input 0's own buffer
// when it can (Row::alias); when it could not, the bytes are copied on the stream.

Ort::Status view_as(Call& call, const Shape& shape) {
  const Tensor x = call.input(0);
  if (element_count(shape) != x.count()) {
    refuse("input " + shape_str(x.shape) + " has " + std::to_string(x.count()) + " elements; the output " +
           shape_str(shape) + " has " + std::to_string(element_count(shape)));
  }
  void* y = call.output(0, shape);
  call.aclnn().copy_on_stream(y, x.data, x.bytes());
  return Ort::Status(nullptr);
}

Ort::Status identity(Call& call) { return view_as(call, call.input(0).shape); }

// ONNX Shape of a tensor whose shape the data decides (a mixture of experts' rows per expert; the
// static ones are folded away with the session's shapes): its dims, start and end clamped as ONNX
// says, written into the device output by one small upload. Left to the CPU, ONNX Runtime would
// copy the whole tensor to the host to read its shape.
Ort::Status shape(Call& call) {
  const Shape& dims = call.input(0).shape;
  const auto rank = static_cast<int64_t>(dims.size());
  const auto clamped = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  const int64_t start = clamped(call.attribute_int("start", 0));
  const int64_t end = std::max(start, clamped(call.attribute_int("end", rank)));
  const std::vector<int64_t> values(dims.begin() + start, dims.begin() + end);
  void* y = call.output(0, {static_cast<int64_t>(values.size())});
  const size_t bytes = values.size() * sizeof(int64_t);
  if (bytes > 0) call.aclnn().copy_on_stream(y, call.aclnn().to_device(values.data(), bytes), bytes);
  return Ort::Status(nullptr);
}

// ONNX Reshape: 0 copies the input's axis (unless allowzero), one -1 takes what is left.
Ort::Status reshape(Call& call) {
  const Tensor x = call.input(0);
  const std::vector<int64_t> spec = call.host_ints(1);
  const bool allowzero = call.attribute_int("allowzero", 0) != 0;
  Shape shape(spec.size());
  size_t inferred = SIZE_MAX;
  bool zero = false;
  int64_t known = 1;
  for (size_t k = 0; k < spec.size(); ++k) {
    int64_t v = spec[k];
    if (v == -1) {
      if (inferred != SIZE_MAX) refuse("shape " + list_str(spec) + " has more than one -1");
      inferred = k;
      continue;
    }
    if (v < -1) refuse("shape " + list_str(spec) + " has " + std::to_string(v) + " at " + std::to_string(k));
    if (v == 0 && !allowzero) {
      if (k >= x.shape.size()) {
        refuse("shape " + list_str(spec) + " copies axis " + std::to_string(k) + " (a 0) of input " +
               shape_str(x.shape) + ", which has " + std::to_string(x.shape.size()) + " axes");
      }
      v = x.shape[k];
    } else if (v == 0) {
      zero = true;
    }
    shape[k] = v;
    known *= v;
  }
  if (inferred != SIZE_MAX) {
    if (zero) refuse("shape " + list_str(spec) + " has both 0 and -1 while allowzero is 1");
    if (known == 0 || x.count() % known != 0) {
      refuse("input " + shape_str(x.shape) + " cannot take shape " + list_str(spec) +
             ": the -1 has no whole size");
    }
    shape[inferred] = x.count() / known;
  }
  return view_as(call, shape);
}

std::vector<int64_t> unique_axes(Call& call, const std::vector<int64_t>& axes, size_t rank,
                                 const char* what) {
  std::vector<int64_t> normalized;
  for (const int64_t a : axes) {
    const int64_t axis = call.axis(a, rank, what);
    if (std::find(normalized.begin(), normalized.end(), axis) != normalized.end()) {
      refuse(std::string(what) + " " + list_str(axes) + " name axis " + std::to_string(axis) + " twice");
    }
    normalized.push_back(axis);
  }
  return normalized;
}

Ort::Status squeeze(Call& call) {
  const Tensor x = call.input(0);
  std::vector<bool> drop(x.shape.size(), false);
  if (call.has_input(1)) {
    if (x.shape.empty()) refuse("input is a scalar: it has no axis to squeeze");
    for (const int64_t axis : unique_axes(call, call.host_ints(1), x.shape.size(), "axes")) {
      if (x.shape[axis] != 1) {
        refuse("axis " + std::to_string(axis) + " of input " + shape_str(x.shape) + " has size " +
               std::to_string(x.shape[axis]) + ", not 1");
      }
      drop[axis] = true;
    }
  } else {
    for (size_t k = 0; k < x.shape.size(); ++k) drop[k] = x.shape[k] == 1;
  }
  Shape shape;
  for (size_t k = 0; k < x.shape.size(); ++k)
    if (!drop[k]) shape.push_back(x.shape[k]);
  return view_as(call, shape);
}

Ort::Status unsqueeze(Call& call) {
  const Tensor x = call.input(0);
  const std::vector<int64_t> axes = call.host_ints(1);
  const size_t rank = x.shape.size() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (const int64_t axis : unique_axes(call, axes, rank, "axes")) inserted[axis] = true;
  Shape shape;
  size_t next = 0;
  for (size_t k = 0; k < rank; ++k) shape.push_back(inserted[k] ? 1 : x.shape[next++]);
  return view_as(call, shape);
}

// ONNX Flatten: [prod(d[:axis]), prod(d[axis:])], axis in [-r, r].
Ort::Status flatten(Call& call) {
  const Tensor x = call.input(0);
  const auto rank = static_cast<int64_t>(x.shape.size());
  int64_t axis = call.attribute_int("axis", 1);
  if (axis < -rank || axis > rank) {
    refuse("axis " + std::to_string(axis) + " is outside [" + std::to_string(-rank) + ", " +
           std::to_string(rank) + "] for input " + shape_str(x.shape));
  }
  if (axis < 0) axis += rank;
  return view_as(call, {element_count(x.shape, 0, axis), element_count(x.shape, axis)});
}

// ---- One aclnn call each.

Ort::Status transpose(Call& call) {
  const Tensor x = call.input(0);
  const size_t rank = x.shape.size();
  std::vector<int64_t> perm(rank);
  for (size_t k = 0; k < rank; ++k) perm[k] = static_cast<int64_t>(rank - 1 - k);
  if (const auto given = call.attribute_ints("perm")) perm = *given;
  if (perm.size() != rank) {
    refuse("perm " + list_str(perm) + " has " + std::to_string(perm.size()) + " entries for input " +
           shape_str(x.shape) + " of " + std::to_string(rank) + " axes");
  }
  std::vector<bool> seen(rank, false);
  Shape shape(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t p = perm[k];
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) {
      refuse("perm " + list_str(perm) + " is not a permutation of the " + std::to_string(rank) + " axes");
    }
    seen[p] = true;
    shape[k] = x.shape[p];
  }
  void* y = call.output(0, shape);
  if (x.count() == 0) return Ort::Status(nullptr);
  if (rank == 0) {  // a scalar has nothing to permute
    call.aclnn().copy_on_stream(y, x.data, x.bytes());
    return Ort::Status(nullptr);
  }
  return call.aclnn().run<acl::IntArrayPrepare>("aclnnPermute", call.tensor(x), call.aclnn().int_array(perm),
                                                call.tensor(y, shape, x.type));
}

// ONNX Expand broadcasts both ways: the output is broadcast(input, shape), which aclnnExpand takes
// as its size.
Ort::Status expand(Call& call) {
  const Tensor x = call.input(0);
  const std::vector<int64_t> spec = call.host_ints(1);
  for (const int64_t d : spec)
    if (d < 0) refuse("shape " + list_str(spec) + " has a negative size");
  const auto shape = broadcast(x.shape, spec);
  if (!shape) refuse("input " + shape_str(x.shape) + " does not broadcast with shape " + list_str(spec));
  void* y = call.output(0, *shape);
  if (element_count(*shape) == 0) return Ort::Status(nullptr);
  return call.aclnn().run<acl::IntArrayPrepare>("aclnnExpand", call.tensor(x), call.aclnn().int_array(*shape),
                                                call.tensor(y, *shape, x.type));
}

Ort::Status concat(Call& call) {
  const auto axis_attribute = call.attribute_int("axis");
  if (!axis_attribute) refuse("attribute 'axis' is required");
  const Tensor first = call.input(0);
  const size_t rank = first.shape.size();
  if (rank == 0) refuse("input 0 is a scalar: there is no axis to join along");
  const int64_t axis = call.axis(*axis_attribute, rank, "axis");
  Shape shape = first.shape;
  shape[axis] = 0;
  for (size_t i = 0; i < call.input_count(); ++i) {
    const Tensor x = call.input(i);
    bool same = x.shape.size() == rank;
    for (size_t k = 0; same && k < rank; ++k)
      same = static_cast<int64_t>(k) == axis || x.shape[k] == first.shape[k];
    if (!same) {
      refuse("input " + std::to_string(i) + " " + shape_str(x.shape) + " does not match input 0 " +
             shape_str(first.shape) + " outside axis " + std::to_string(axis));
    }
    shape[axis] += x.shape[axis];
  }
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  // Empty inputs add nothing: they stay out of the list, as torch's cat skips them.
  std::vector<const aclTensor*> tensors;
  for (size_t i = 0; i < call.input_count(); ++i) {
    const Tensor x = call.input(i);
    if (x.count() > 0) tensors.push_back(call.tensor(x));
  }
  return call.aclnn().run<acl::CatPrepare>("aclnnCat", call.aclnn().tensor_list(tensors), axis,
                                           call.tensor(y, shape, first.type));
}

// ONNX Slice, clamped as ONNX says, becomes aclnnSliceV2 with in-range starts, tight ends and
// positive steps; an axis with a negative step is sliced ascending (the same elements) into a
// scratch buffer, then reversed with aclnnFlip, since aclnnSliceV2 takes positive steps only.
Ort::Status slice(Call& call) {
  const Tensor x = call.input(0);
  const size_t rank = x.shape.size();
  const std::vector<int64_t> starts = call.host_ints(1), ends = call.host_ints(2);
  std::vector<int64_t> axes(starts.size()), steps(starts.size(), 1);
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  if (call.has_input(3)) axes = call.host_ints(3);
  if (call.has_input(4)) steps = call.host_ints(4);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    refuse("starts, ends, axes and steps have " + std::to_string(starts.size()) + ", " +
           std::to_string(ends.size()) + ", " + std::to_string(axes.size()) + " and " +
           std::to_string(steps.size()) + " values; they must have as many");
  }
  if (rank == 0 && !starts.empty()) refuse("input is a scalar: it has no axis to slice");
  Shape shape = x.shape;
  std::vector<int64_t> v_starts, v_ends, v_steps, flips;
  const std::vector<int64_t> v_axes = unique_axes(call, axes, rank, "axes");
  for (size_t i = 0; i < v_axes.size(); ++i) {
    const int64_t axis = v_axes[i], dim = x.shape[axis], step = steps[i];
    if (step == 0) refuse("steps[" + std::to_string(i) + "] is 0");
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t length = 0, first = 0;
    // Magnitude of the step, INT64_MIN's kept in range: any step past the axis takes one element.
    const int64_t stride = step > 0 ? step : step == INT64_MIN ? INT64_MAX : -step;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      length = end > start ? 1 + (end - start - 1) / stride : 0;
      first = start;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      length = start > end ? 1 + (start - end - 1) / stride : 0;
      first = length > 0 ? start - (length - 1) * stride : 0;
      flips.push_back(axis);
    }
    shape[axis] = length;
    v_starts.push_back(first);
    v_ends.push_back(length > 0 ? first + (length - 1) * stride + 1 : first);
    v_steps.push_back(stride);
  }
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  if (v_axes.empty()) {  // nothing sliced: the input itself
    call.aclnn().copy_on_stream(y, x.data, x.bytes());
    return Ort::Status(nullptr);
  }
  const size_t bytes = static_cast<size_t>(element_count(shape)) * type_size(x.type);
  void* sliced = flips.empty() ? y : call.aclnn().scratch(bytes);
  AclnnCall& aclnn = call.aclnn();
  Ort::Status status = aclnn.run<acl::SliceV2Prepare>(
      "aclnnSliceV2", call.tensor(x), aclnn.int_array(v_starts), aclnn.int_array(v_ends),
      aclnn.int_array(v_axes), aclnn.int_array(v_steps), call.tensor(sliced, shape, x.type));
  if (!status.IsOK() || flips.empty()) return status;
  return aclnn.run<acl::IntArrayPrepare>("aclnnFlip", call.tensor(sliced, shape, x.type),
                                         aclnn.int_array(flips), call.tensor(y, shape, x.type));
}

// ONNX Split: sizes from the 'split' input, else num_outputs chunks of ceil(d / n) (the last
// smaller), else as many equal parts as the node has outputs.
Ort::Status split(Call& call) {
  const Tensor x = call.input(0);
  const size_t rank = x.shape.size();
  if (rank == 0) refuse("input is a scalar: there is no axis to split");
  const int64_t axis = call.axis(call.attribute_int("axis", 0), rank, "axis");
  const int64_t dim = x.shape[axis];
  const auto n = static_cast<int64_t>(call.output_count());
  std::vector<int64_t> sizes;
  const auto num_outputs = call.attribute_int("num_outputs");
  if (call.has_input(1)) {
    if (num_outputs) refuse("input 'split' and attribute 'num_outputs' are both given; ONNX allows one");
    sizes = call.host_ints(1);
    int64_t total = 0;
    for (const int64_t s : sizes) {
      if (s < 0) refuse("split " + list_str(sizes) + " has a negative size");
      total += s;
    }
    if (static_cast<int64_t>(sizes.size()) != n) {
      refuse("split " + list_str(sizes) + " has " + std::to_string(sizes.size()) + " sizes for " +
             std::to_string(n) + " outputs");
    }
    if (total != dim) {
      refuse("split " + list_str(sizes) + " sums to " + std::to_string(total) + ", not axis " +
             std::to_string(axis) + "'s " + std::to_string(dim));
    }
  } else if (num_outputs) {
    if (*num_outputs != n) {
      refuse("attribute 'num_outputs' is " + std::to_string(*num_outputs) + " but the node has " +
             std::to_string(n) + " outputs");
    }
    const int64_t chunk = (dim + n - 1) / n;
    sizes.assign(n, chunk);
    sizes.back() = dim - chunk * (n - 1);
    if (sizes.back() < 0) {
      refuse("axis " + std::to_string(axis) + " of size " + std::to_string(dim) + " does not make " +
             std::to_string(n) + " chunks of " + std::to_string(chunk));
    }
  } else {
    if (dim % n != 0) {
      refuse("axis " + std::to_string(axis) + " of size " + std::to_string(dim) + " does not split into " +
             std::to_string(n) + " equal parts");
    }
    sizes.assign(n, dim / n);
  }
  // Empty pieces have nothing to write: they stay out of the vendor's list.
  std::vector<int64_t> pieces;
  std::vector<const aclTensor*> outs;
  for (int64_t i = 0; i < n; ++i) {
    Shape shape = x.shape;
    shape[axis] = sizes[i];
    void* y = call.output(i, shape);
    if (element_count(shape) > 0) {
      pieces.push_back(sizes[i]);
      outs.push_back(call.tensor(y, shape, x.type));
    }
  }
  if (outs.empty()) return Ort::Status(nullptr);
  return call.aclnn().run<acl::SplitWithSizePrepare>("aclnnSplitWithSize", call.tensor(x),
                                                     call.aclnn().int_array(pieces), axis,
                                                     call.aclnn().tensor_list(outs));
}

// ONNX Pad, mode constant: pads [x1_begin, x2_begin, ..., x1_end, x2_end] over `axes` (all by
// default), negative pads crop; aclnnConstantPadNd takes them last axis first, as torch's pad.
Ort::Status pad(Call& call) {
  const std::string mode = call.attribute_string("mode").value_or("constant");
  if (mode != "constant") refuse("mode " + quoted(mode) + " is not supported on the NPU (constant only)");
  const Tensor x = call.input(0);
  const size_t rank = x.shape.size();
  const std::vector<int64_t> pads = call.host_ints(1);
  std::vector<int64_t> all(rank);
  for (size_t k = 0; k < rank; ++k) all[k] = static_cast<int64_t>(k);
  const std::vector<int64_t> axes =
      call.has_input(3) ? unique_axes(call, call.host_ints(3), rank, "axes") : all;
  if (pads.size() != 2 * axes.size()) {
    refuse("pads " + list_str(pads) + " has " + std::to_string(pads.size()) + " values for " +
           std::to_string(axes.size()) + " axes (two per axis)");
  }
  const double value = call.has_input(2) ? call.host_scalar(2) : 0.0;
  std::vector<int64_t> begin(rank, 0), end(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    begin[axes[i]] = pads[i];
    end[axes[i]] = pads[i + axes.size()];
  }
  Shape shape(rank);
  for (size_t k = 0; k < rank; ++k) {
    shape[k] = x.shape[k] + begin[k] + end[k];
    if (shape[k] < 0) {
      refuse("pads " + list_str(pads) + " crop axis " + std::to_string(k) + " of input " +
             shape_str(x.shape) + " below 0");
    }
  }
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  const aclScalar* fill = call.aclnn().scalar(value, scalar_type(x.type));
  if (rank == 0) {
    call.aclnn().copy_on_stream(y, x.data, x.bytes());
    return Ort::Status(nullptr);
  }
  if (x.count() == 0) {  // all padding: nothing of the input to place
    return call.aclnn().run<acl::InplaceFillScalarPrepare>("aclnnInplaceFillScalar",
                                                           call.tensor(y, shape, x.type), fill);
  }
  std::vector<int64_t> torch_pad;
  for (size_t k = rank; k-- > 0;) {
    torch_pad.push_back(begin[k]);
    torch_pad.push_back(end[k]);
  }
  return call.aclnn().run<acl::ConstantPadNdPrepare>("aclnnConstantPadNd", call.tensor(x),
                                                     call.aclnn().int_array(torch_pad), fill,
                                                     call.tensor(y, shape, x.type));
}

Ort::Status tile(Call& call) {
  const Tensor x = call.input(0);
  const std::vector<int64_t> repeats = call.host_ints(1);
  if (repeats.size() != x.shape.size()) {
    refuse("repeats " + list_str(repeats) + " has " + std::to_string(repeats.size()) + " values for input " +
           shape_str(x.shape) + " of " + std::to_string(x.shape.size()) + " axes");
  }
  Shape shape(repeats.size());
  for (size_t k = 0; k < repeats.size(); ++k) {
    if (repeats[k] < 0) refuse("repeats " + list_str(repeats) + " has a negative count");
    shape[k] = x.shape[k] * repeats[k];
  }
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  if (shape.empty()) {
    call.aclnn().copy_on_stream(y, x.data, x.bytes());
    return Ort::Status(nullptr);
  }
  return call.aclnn().run<acl::IntArrayPrepare>(
      "aclnnRepeat", call.tensor(x), call.aclnn().int_array(repeats), call.tensor(y, shape, x.type));
}

Ort::Status trilu(Call& call) {
  const Tensor x = call.input(0);
  if (x.shape.size() < 2) refuse("input " + shape_str(x.shape) + " has fewer than the 2 axes of a matrix");
  int64_t k = 0;
  if (call.has_input(1)) {
    const std::vector<int64_t> given = call.host_ints(1);
    if (given.size() != 1) refuse("k " + list_str(given) + " must hold one value");
    k = given[0];
  }
  const bool upper = call.attribute_int("upper", 1) != 0;
  void* y = call.output(0, x.shape);
  if (x.count() == 0) return Ort::Status(nullptr);
  return call.aclnn().run<acl::TriangularPrepare>(upper ? "aclnnTriu" : "aclnnTril", call.tensor(x), k,
                                                  call.tensor(y, x.shape, x.type));
}

// ONNX Range: max(ceil((limit - start) / delta), 0) values start + i * delta.
Ort::Status range(Call& call) {
  const ONNXTensorElementDataType type = call.input(0).type;
  for (size_t i = 0; i < 3; ++i) {
    if (call.input(i).count() != 1) refuse("input " + std::to_string(i) + " must be a scalar");
  }
  int64_t count = 0;
  double start = 0, limit = 0, delta = 0;
  if (type == kI32 || type == kI64) {
    const int64_t s = call.host_ints(0)[0], l = call.host_ints(1)[0], d = call.host_ints(2)[0];
    if (d == 0) refuse("delta is 0");
    const __int128 span = static_cast<__int128>(l) - s;
    const __int128 n = d > 0 ? (span > 0 ? (span + d - 1) / d : 0) : (span < 0 ? (span + d + 1) / d : 0);
    count = static_cast<int64_t>(n);
    start = static_cast<double>(s), limit = static_cast<double>(l), delta = static_cast<double>(d);
  } else {
    start = call.host_scalar(0), limit = call.host_scalar(1), delta = call.host_scalar(2);
    if (delta == 0) refuse("delta is 0");
    const double n = std::ceil((limit - start) / delta);
    if (!std::isfinite(n)) refuse("start, limit and delta do not give a finite count");
    count = n > 0 ? static_cast<int64_t>(n) : 0;
  }
  const Shape shape{count};
  void* y = call.output(0, shape);
  if (count == 0) return Ort::Status(nullptr);
  const aclDataType t = scalar_type(type);
  AclnnCall& aclnn = call.aclnn();
  return aclnn.run<acl::ArangePrepare>("aclnnArange", aclnn.scalar(start, t), aclnn.scalar(limit, t),
                                       aclnn.scalar(delta, t), call.tensor(y, shape, type));
}

// ---- ConstantOfShape's 'value' is a tensor attribute, read through ORT's C API.
struct FillValue {
  ONNXTensorElementDataType type = kF32;  // ONNX's default: a float32 zero
  double value = 0;
};

FillValue fill_value(const Call& call) {
  const OrtKernelInfo* info = call.kernel_info();
  Ort::AllocatorWithDefaultOptions allocator;
  OrtValue* raw = nullptr;
  if (OrtStatus* status = Ort::GetApi().KernelInfoGetAttribute_tensor(info, "value", allocator, &raw)) {
    Ort::GetApi().ReleaseStatus(status);  // no 'value': the default
    return {};
  }
  const Ort::Value value(raw);
  const auto shape = value.GetTensorTypeAndShapeInfo();
  if (shape.GetElementCount() != 1) {
    refuse("attribute 'value' " + shape_str(shape.GetShape()) + " must hold one value");
  }
  FillValue fill{shape.GetElementType(), 0};
  const void* data = value.GetTensorRawData();
  switch (fill.type) {
    case kF32:
      fill.value = *static_cast<const float*>(data);
      break;
    case kF16:
      fill.value = static_cast<float>(*static_cast<const Ort::Float16_t*>(data));
      break;
    case kBF16:
      fill.value = static_cast<float>(*static_cast<const Ort::BFloat16_t*>(data));
      break;
    case kI32:
      fill.value = *static_cast<const int32_t*>(data);
      break;
    // Through double, as AclnnCall::scalar takes it: exact up to 2^53.
    case kI64:
      fill.value = static_cast<double>(*static_cast<const int64_t*>(data));
      break;
    case kBool:
    case kU8:
      fill.value = *static_cast<const uint8_t*>(data);
      break;
    case kI8:
      fill.value = *static_cast<const int8_t*>(data);
      break;
    default:
      refuse("attribute 'value' has element type " + std::to_string(fill.type) + ", which the NPU lacks");
  }
  return fill;
}

Ort::Status constant_of_shape(Call& call) {
  const std::vector<int64_t> shape = call.host_ints(0);
  for (const int64_t d : shape)
    if (d < 0) refuse("shape " + list_str(shape) + " has a negative size");
  const FillValue fill = fill_value(call);
  const ONNXTensorElementDataType type = call.output_type(0);
  if (fill.type != type) {
    // The row's one kernel outputs float32: ORT types a custom op's outputs before any kernel sees
    // the node, and a shape-inference function cannot read a tensor attribute through the C API
    // version this library builds against (ReadOpAttr reads ints, floats and strings only; the
    // OpAttr_GetType / OpAttr_GetTensorAttributeAsOrtValue of later versions are out of reach), so
    // nothing can type the output from 'value'. A graph that types it otherwise fails in ORT's load.
    refuse(std::string("attribute 'value' is ") + type_name_of(fill.type) + "; the NPU kernel fills " +
           type_name_of(type) + " only");
  }
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  return call.aclnn().run<acl::InplaceFillScalarPrepare>("aclnnInplaceFillScalar",
                                                         call.tensor(y, shape, type),
                                                         call.aclnn().scalar(fill.value, scalar_type(type)));
}

}  // namespace

std::vector<Row> layout_rows() {
  const Types indices = {kI32, kI64};
  const auto with_shape = with_index(kAll, {kI64});
  // Slice's starts, ends, axes and steps: int32 or int64, all alike.
  const auto slice_signatures = pairs(kAll, indices, [](auto t, auto i) { return Types{t, i, i, i, i, t}; });
  // Pad's data, pads, constant_value, axes.
  const auto pad_signatures = pairs(kAll, indices, [](auto t, auto i) { return Types{t, kI64, t, i, t}; });
  return {
      Row{"Reshape", "(view)", reshape, 2, 1, with_shape}.on_host({1}).as_view(),
      Row{"Squeeze", "(view)", squeeze, 2, 1, with_shape}.on_host({1}).optional_from(1).as_view(),
      Row{"Unsqueeze", "(view)", unsqueeze, 2, 1, with_shape}.on_host({1}).as_view(),
      Row{"Flatten", "(view)", flatten, 1, 1, typed(kAll, 2)}.as_view(),
      Row{"Identity", "(view)", identity, 1, 1, typed(kAll, 2)}.as_view(),
      {"Transpose", "aclnnPermute", transpose, 1, 1, typed(kAll, 2)},
      Row{"Expand", "aclnnExpand", expand, 2, 1, with_shape}.on_host({1}),
      Row{"Concat", "aclnnCat", concat, 1, 1, typed(kAll, 2)}.repeats_last_input(),
      Row{"Slice", "aclnnSliceV2, aclnnFlip", slice, 5, 1, slice_signatures}
          .on_host({1, 2, 3, 4})
          .optional_from(3),
      Row{"Split", "aclnnSplitWithSize", split, 2, 1, with_shape}
          .on_host({1})
          .optional_from(1)
          .repeats_last_output(),
      Row{"Pad", "aclnnConstantPadNd, aclnnInplaceFillScalar", pad, 4, 1, pad_signatures}
          .on_host({1, 2, 3})
          .optional_from(2),
      Row{"Tile", "aclnnRepeat", tile, 2, 1, with_shape}.on_host({1}),
      Row{"Trilu", "aclnnTriu, aclnnTril", trilu, 2, 1, with_shape}.on_host({1}).optional_from(1),
      Row{"Range", "aclnnArange", range, 3, 1, typed({kF32, kI32, kI64}, 4)}.on_host({0, 1, 2}),
      Row{"ConstantOfShape", "aclnnInplaceFillScalar", constant_of_shape, 1, 1, {{kI64, kF32}}}.on_host({0}),
      {"Shape", "(dims uploaded)", shape, 1, 1, typed(kAll, 1, {}, {kI64})},
  };
}

}  // namespace oao::standard
