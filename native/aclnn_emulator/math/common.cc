#include "math/common.h"

#include <cmath>

#include "elements.h"

namespace aclemu::math {

bool is_float(aclDataType dtype) {
  return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16 || dtype == ACL_DOUBLE;
}

bool is_integer(aclDataType dtype) { return !is_float(dtype); }

std::vector<double> read(const aclTensor& t) {
  std::vector<double> values;
  if (is_float(t.dtype)) {
    for (const float v : read_floats(t)) values.push_back(v);
  } else {
    for (const int64_t v : read_ints(t)) values.push_back(static_cast<double>(v));
  }
  return values;
}

void write(const aclTensor& t, const std::vector<double>& values) {
  if (is_float(t.dtype)) {
    write_floats(t, std::vector<float>(values.begin(), values.end()));
    return;
  }
  std::vector<int64_t> ints(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    ints[i] = t.dtype == ACL_BOOL        ? values[i] != 0
              : std::isfinite(values[i]) ? static_cast<int64_t>(values[i])
                                         : 0;
  }
  write_ints(t, ints);
}

std::vector<int64_t> broadcast_shape(const aclTensor& a, const char* a_name, const aclTensor& b,
                                     const char* b_name) {
  const size_t rank = std::max(a.dims.size(), b.dims.size());
  std::vector<int64_t> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t da = k < rank - a.dims.size() ? 1 : a.dims[k - (rank - a.dims.size())];
    const int64_t db = k < rank - b.dims.size() ? 1 : b.dims[k - (rank - b.dims.size())];
    if (da != db && da != 1 && db != 1) {
      fail(kErrParamInvalid, std::string(a_name) + " " + shape_text(a.dims) + " and " + b_name + " " +
                                 shape_text(b.dims) + " do not broadcast");
    }
    out[k] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> broadcast_index(const std::vector<int64_t>& out, const std::vector<int64_t>& in) {
  const size_t rank = out.size(), pad = rank - in.size();
  std::vector<int64_t> in_strides(rank, 0);
  int64_t stride = 1;
  for (size_t k = rank; k-- > pad;) {
    in_strides[k] = in[k - pad] == 1 ? 0 : stride;
    stride *= in[k - pad];
  }
  std::vector<int64_t> index(static_cast<size_t>(numel(out)));
  std::vector<int64_t> position(rank, 0);
  int64_t offset = 0;
  for (auto& entry : index) {
    entry = offset;
    for (size_t k = rank; k-- > 0;) {  // the next row-major position, carrying the offset along
      if (++position[k] < out[k]) {
        offset += in_strides[k];
        break;
      }
      offset -= in_strides[k] * (out[k] - 1);
      position[k] = 0;
    }
  }
  return index;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) strides[k - 1] = strides[k] * dims[k];
  return strides;
}

void check_out_shape(const aclTensor& out, const char* name, const std::vector<int64_t>& want) {
  check_shape(out, name, want, "the shape the op computes");
}

const std::vector<int64_t>& need_array(const aclIntArray* array, const char* name) {
  if (array == nullptr) fail(kErrParamNullptr, std::string(name) + " is NULL");
  if (!hooks().is_live(Kind::kIntArray, array))
    fail(kErrParamInvalid, std::string(name) + " is not a live aclIntArray");
  return array->values;
}

const aclScalar& need_scalar(const aclScalar* scalar, const char* name) {
  if (scalar == nullptr) fail(kErrParamNullptr, std::string(name) + " is NULL");
  if (!hooks().is_live(Kind::kScalar, scalar))
    fail(kErrParamInvalid, std::string(name) + " is not a live aclScalar");
  return *scalar;
}

}  // namespace aclemu::math
