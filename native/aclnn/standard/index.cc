// Gathers and scatters. Gather is aclnnGatherV2, which takes ONNX's indices counted from the end as
// they are. GatherElements and ScatterElements are torch's gather and scatter (aclnnGather,
// aclnnScatter), whose indices must lie in [0, size): ONNX's negative ones are moved into range on
// the device first. GatherND is aclnnGatherNd, once per batch when batch_dims > 0. ScatterND is
// aclnnIndexPutImpl (torch's index_put_) on a copy of data: aclnnScatterNd neither adds nor takes
// integer data or indices counted from the end, and index_put_ does all three (its linear-index
// kernel wraps negative indices, ops-nn index/linear_index_v2).
// Index values never come to the host: one out of range fails the vendor's launch, as ONNX leaves
// such a node undefined.
#include "aclnn/standard/elementwise_abi.h"
#include "aclnn/standard/index_abi.h"
#include "aclnn/standard/rows.h"

namespace oao::standard {
namespace {

const void* offset_by(const void* data, int64_t elements, ONNXTensorElementDataType type) {
  return static_cast<const char*>(data) + elements * static_cast<int64_t>(type_size(type));
}

std::string axis_text(int64_t axis, const Shape& shape) {
  return "axis " + std::to_string(axis) + " of input 'data' " + shape_str(shape);
}

// `index` with ONNX's indices counted from the end of an axis of `size` moved into [0, size), in
// scratch: index + size * (index < 0), all on the device. One below -size stays negative, so the
// range check of the function that takes it still fails.
Ort::Status from_end(Call& call, const Tensor& index, int64_t size, Tensor& moved) {
  AclnnCall& aclnn = call.aclnn();
  const size_t bytes = type_size(index.type);
  const aclDataType type = acl_type_of(index.type);
  const Shape one = {1};
  // A zero of the index type: the first index less itself (nothing to copy from the host, which
  // would wait for the stream).
  void* zero = aclnn.scratch(bytes);
  const aclTensor* first = call.tensor(index.data, one, index.type);
  Ort::Status status = aclnn.run<acl::AlphaBinaryPrepare>("aclnnSub", first, first, aclnn.scalar(1.0, type),
                                                          call.tensor(zero, one, index.type));
  if (!status.IsOK()) return status;
  // 1 where the index counts from the end: comparisons write numbers as well as bools.
  void* negative = aclnn.scratch(bytes * static_cast<size_t>(index.count()));
  status =
      aclnn.run<acl::BinaryPrepare>("aclnnLtTensor", call.tensor(index), call.tensor(zero, one, index.type),
                                    call.tensor(negative, index.shape, index.type));
  if (!status.IsOK()) return status;
  void* out = aclnn.scratch(bytes * static_cast<size_t>(index.count()));
  moved = Tensor{index.shape, index.type, out};
  return aclnn.run<acl::AlphaBinaryPrepare>(
      "aclnnAdd", call.tensor(index), call.tensor(negative, index.shape, index.type),
      aclnn.scalar(static_cast<double>(size), type), call.tensor(moved));
}

Ort::Status gather(Call& call) {
  const Tensor data = call.input(0), indices = call.input(1);
  const size_t rank = data.shape.size();
  if (rank == 0) return call.error("input 'data' is a scalar; it needs an axis to gather along");
  const int64_t axis = call.axis(call.attribute_int("axis", 0), rank, "axis");
  Shape shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  if (data.shape[axis] == 0)
    return call.error(axis_text(axis, data.shape) + " is empty: every index is out of range");
  // The vendor counts a 0-d index as [1]: the same elements, with an axis of 1 where ONNX has none.
  Shape vendor_shape = shape;
  if (indices.shape.empty()) vendor_shape.insert(vendor_shape.begin() + axis, 1);
  return call.aclnn().run<acl::GatherDimPrepare>("aclnnGatherV2", call.tensor(data), axis,
                                                 call.tensor(indices),
                                                 call.tensor(y, vendor_shape, call.output_type(0)));
}

// GatherElements' and ScatterElements' shared rules: indices of data's rank, no longer than
// data along the other axes. Returns the axis.
int64_t element_axis(Call& call, const Tensor& data, const Tensor& indices) {
  const size_t rank = data.shape.size();
  if (rank == 0) {
    throw Ort::Exception("input 'data' is a scalar; it needs an axis to index along", ORT_INVALID_ARGUMENT);
  }
  if (indices.shape.size() != rank) {
    throw Ort::Exception("input 'indices' " + shape_str(indices.shape) +
                             " must have the rank of input 'data' " + shape_str(data.shape),
                         ORT_INVALID_ARGUMENT);
  }
  const int64_t axis = call.axis(call.attribute_int("axis", 0), rank, "axis");
  for (size_t d = 0; d < rank; ++d) {
    if (static_cast<int64_t>(d) != axis && indices.shape[d] > data.shape[d]) {
      throw Ort::Exception("input 'indices' " + shape_str(indices.shape) + " is longer than input 'data' " +
                               shape_str(data.shape) + " along axis " + std::to_string(d),
                           ORT_INVALID_ARGUMENT);
    }
  }
  return axis;
}

Ort::Status gather_elements(Call& call) {
  const Tensor data = call.input(0), indices = call.input(1);
  const int64_t axis = element_axis(call, data, indices);
  void* y = call.output(0, indices.shape);
  if (indices.count() == 0) return Ort::Status(nullptr);
  if (data.shape[axis] == 0)
    return call.error(axis_text(axis, data.shape) + " is empty: every index is out of range");
  Tensor moved;
  if (Ort::Status status = from_end(call, indices, data.shape[axis], moved); !status.IsOK()) return status;
  return call.aclnn().run<acl::GatherDimPrepare>("aclnnGather", call.tensor(data), axis, call.tensor(moved),
                                                 call.tensor(y, indices.shape, call.output_type(0)));
}

Ort::Status scatter_elements(Call& call) {
  const Tensor data = call.input(0), indices = call.input(1), updates = call.input(2);
  const std::string reduction = call.attribute_string("reduction").value_or("none");
  const int64_t reduce = reduction == "none" ? 0 : reduction == "add" ? 1 : reduction == "mul" ? 2 : -1;
  if (reduce < 0) {
    return call.error("reduction '" + reduction +
                      "' has no aclnnScatter mode (it replaces, adds or multiplies)");
  }
  const int64_t axis = element_axis(call, data, indices);
  if (updates.shape != indices.shape) {
    return call.error("input 'updates' " + shape_str(updates.shape) +
                      " must have the shape of input 'indices' " + shape_str(indices.shape));
  }
  void* y = call.output(0, data.shape);
  if (data.count() == 0) return Ort::Status(nullptr);
  const ONNXTensorElementDataType type = call.output_type(0);
  if (indices.count() == 0) {
    call.aclnn().copy_on_stream(y, data.data, data.bytes());
    return Ort::Status(nullptr);  // a launch-free call waits for its copy (AclnnCall::copy_on_stream)
  }
  if (data.shape[axis] == 0)
    return call.error(axis_text(axis, data.shape) + " is empty: every index is out of range");
  Tensor moved;
  if (Ort::Status status = from_end(call, indices, data.shape[axis], moved); !status.IsOK()) return status;
  return call.aclnn().run<acl::ScatterPrepare>("aclnnScatter", call.tensor(data), axis, call.tensor(moved),
                                               call.tensor(updates), reduce,
                                               call.tensor(y, data.shape, type));
}

// ONNX's rules for the last axis of GatherND's and ScatterND's indices: a tuple of 1 to `rank`
// coordinates. Returns its length.
int64_t tuple_length(const Tensor& indices, int64_t rank) {
  if (indices.shape.empty()) {
    throw Ort::Exception("input 'indices' is a scalar; its last axis must hold the index tuples",
                         ORT_INVALID_ARGUMENT);
  }
  const int64_t k = indices.shape.back();
  if (k < 1 || k > rank) {
    throw Ort::Exception("input 'indices' " + shape_str(indices.shape) + " holds tuples of " +
                             std::to_string(k) + " coordinates; 1 to " + std::to_string(rank) +
                             " index input 'data'",
                         ORT_INVALID_ARGUMENT);
  }
  return k;
}

Ort::Status gather_nd(Call& call) {
  const Tensor data = call.input(0), indices = call.input(1);
  const auto r = static_cast<int64_t>(data.shape.size()), q = static_cast<int64_t>(indices.shape.size());
  const int64_t b = call.attribute_int("batch_dims", 0);
  if (r < 1) return call.error("input 'data' is a scalar; it needs an axis to index");
  if (b < 0 || b >= std::min(q, r)) {
    return call.error("batch_dims " + std::to_string(b) + " is outside [0, " +
                      std::to_string(std::min(q, r)) + ") for input 'data' " + shape_str(data.shape) +
                      " and input 'indices' " + shape_str(indices.shape));
  }
  if (!std::equal(data.shape.begin(), data.shape.begin() + b, indices.shape.begin())) {
    return call.error("the first " + std::to_string(b) + " axes (batch_dims) of input 'data' " +
                      shape_str(data.shape) + " and input 'indices' " + shape_str(indices.shape) + " differ");
  }
  const int64_t k = tuple_length(indices, r - b);
  Shape shape(indices.shape.begin(), indices.shape.end() - 1);
  shape.insert(shape.end(), data.shape.begin() + b + k, data.shape.end());
  void* y = call.output(0, shape);
  if (element_count(shape) == 0) return Ort::Status(nullptr);
  for (int64_t d = b; d < b + k; ++d) {
    if (data.shape[d] == 0)
      return call.error(axis_text(d, data.shape) + " is empty: every index is out of range");
  }
  // aclnnGatherNd has no batch axes: one call per batch, on its slices (contiguous blocks).
  const Shape data_slice(data.shape.begin() + b, data.shape.end());
  const Shape indices_slice(indices.shape.begin() + b, indices.shape.end());
  const Shape out_slice(shape.begin() + b, shape.end());
  const int64_t batches = element_count(Shape(data.shape.begin(), data.shape.begin() + b));
  const ONNXTensorElementDataType type = call.output_type(0);
  for (int64_t n = 0; n < batches; ++n) {
    const void* data_n = offset_by(data.data, n * element_count(data_slice), data.type);
    const void* indices_n = offset_by(indices.data, n * element_count(indices_slice), indices.type);
    const void* y_n = offset_by(y, n * element_count(out_slice), type);
    Ort::Status status = call.aclnn().run<acl::GatherNdPrepare>(
        "aclnnGatherNd", call.tensor(data_n, data_slice, data.type),
        call.tensor(indices_n, indices_slice, indices.type), true, call.tensor(y_n, out_slice, type));
    if (!status.IsOK()) return status;
  }
  return Ort::Status(nullptr);
}

Ort::Status scatter_nd(Call& call) {
  const Tensor data = call.input(0), indices = call.input(1), updates = call.input(2);
  const std::string reduction = call.attribute_string("reduction").value_or("none");
  if (reduction != "none" && reduction != "add") {
    return call.error("reduction '" + reduction + "' has no aclnnIndexPutImpl mode (it replaces or adds)");
  }
  const auto r = static_cast<int64_t>(data.shape.size());
  if (r < 1) return call.error("input 'data' is a scalar; it needs an axis to index");
  const int64_t k = tuple_length(indices, r);
  const Shape tuples(indices.shape.begin(), indices.shape.end() - 1);
  Shape expected = tuples;
  expected.insert(expected.end(), data.shape.begin() + k, data.shape.end());
  if (updates.shape != expected) {
    return call.error("input 'updates' " + shape_str(updates.shape) + " must be " + shape_str(expected) +
                      " (indices' tuples, then data's axes past the first " + std::to_string(k) + ")");
  }
  void* y = call.output(0, data.shape);
  if (data.count() == 0) return Ort::Status(nullptr);
  const ONNXTensorElementDataType type = call.output_type(0);
  call.aclnn().copy_on_stream(y, data.data, data.bytes());
  if (element_count(tuples) == 0) return Ort::Status(nullptr);  // the copy alone: it is waited for
  // index_put_ takes one index tensor per axis: coordinate j of every tuple, a strided view of indices.
  Shape strides(tuples.size(), k);
  for (size_t i = tuples.size(); i-- > 1;) strides[i - 1] = strides[i] * tuples[i];
  std::vector<const aclTensor*> coordinates;
  for (int64_t j = 0; j < k; ++j) {
    coordinates.push_back(
        call.aclnn().view(indices.data, tuples, strides, j, indices.shape, acl_type_of(indices.type)));
  }
  // unsafe: the range check, which fails the launch on an index out of range.
  return call.aclnn().run<acl::IndexPutImplPrepare>("aclnnIndexPutImpl", call.tensor(y, data.shape, type),
                                                    call.aclnn().tensor_list(coordinates),
                                                    call.tensor(updates), reduction == "add", true);
}

// Data of every type, indices of `index_types`, then updates (scatters) like data: the output is data's.
std::vector<Types> index_signatures(const Types& index_types, bool updates) {
  if (!updates) return with_index(kAll, index_types);
  return pairs(kAll, index_types, [](auto t, auto i) { return Types{t, i, t, t}; });
}

}  // namespace

std::vector<Row> index_rows() {
  const Types int32_or_64 = {kI64, kI32};
  return {
      {"Gather", "aclnnGatherV2", gather, 2, 1, index_signatures(int32_or_64, false)},
      {"GatherElements", "aclnnGather (aclnnSub, aclnnLtTensor, aclnnAdd for indices from the end)",
       gather_elements, 2, 1, index_signatures(int32_or_64, false)},
      {"GatherND", "aclnnGatherNd", gather_nd, 2, 1, index_signatures({kI64}, false)},
      {"ScatterElements", "aclnnScatter (aclnnSub, aclnnLtTensor, aclnnAdd for indices from the end)",
       scatter_elements, 3, 1, index_signatures(int32_or_64, true)},
      {"ScatterND", "aclnnIndexPutImpl", scatter_nd, 3, 1, index_signatures({kI64}, true)},
  };
}

}  // namespace oao::standard
