#include "tensor.h"

#include "elements.h"

namespace aclemu {

size_t element_size(aclDataType dtype) {
  switch (dtype) {
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_BOOL:
      return 1;
    case ACL_FLOAT16:
    case ACL_BF16:
    case ACL_INT16:
    case ACL_UINT16:
      return 2;
    case ACL_FLOAT:
    case ACL_INT32:
    case ACL_UINT32:
      return 4;
    case ACL_INT64:
    case ACL_UINT64:
    case ACL_DOUBLE:
      return 8;
    default:
      return 0;
  }
}

std::string dtype_name(aclDataType dtype) {
  switch (dtype) {
    case ACL_FLOAT:
      return "FLOAT32";
    case ACL_FLOAT16:
      return "FLOAT16";
    case ACL_BF16:
      return "BFLOAT16";
    case ACL_INT8:
      return "INT8";
    case ACL_INT16:
      return "INT16";
    case ACL_INT32:
      return "INT32";
    case ACL_INT64:
      return "INT64";
    case ACL_UINT8:
      return "UINT8";
    case ACL_UINT16:
      return "UINT16";
    case ACL_UINT32:
      return "UINT32";
    case ACL_UINT64:
      return "UINT64";
    case ACL_DOUBLE:
      return "FLOAT64";
    case ACL_BOOL:
      return "BOOL";
    default:
      return "dtype " + std::to_string(static_cast<int>(dtype));
  }
}

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

bool is_contiguous(const aclTensor& t) {
  int64_t expected = 1;
  for (size_t k = t.dims.size(); k-- > 0;) {
    if (t.dims[k] != 1 && t.strides[k] != expected) return false;
    expected *= t.dims[k];
  }
  return true;
}

bool view_fits_storage(const aclTensor& t) {
  if (numel(t) == 0) return true;
  int64_t last = t.offset;
  for (size_t k = 0; k < t.dims.size(); ++k) last += (t.dims[k] - 1) * t.strides[k];
  return last < numel(t.storage_dims);
}

namespace {

// Calls f(i, address) for every element, i counting in row-major order.
template <class F>
void for_each_element(const aclTensor& t, F&& f) {
  const int64_t n = numel(t);
  const size_t rank = t.dims.size();
  const size_t size = element_size(t.dtype);
  std::vector<int64_t> index(rank, 0);
  int64_t offset = t.offset;
  for (int64_t i = 0; i < n; ++i) {
    f(i, static_cast<char*>(t.data) + offset * static_cast<int64_t>(size));
    for (size_t k = rank; k-- > 0;) {
      if (++index[k] < t.dims[k]) {
        offset += t.strides[k];
        break;
      }
      offset -= t.strides[k] * (t.dims[k] - 1);
      index[k] = 0;
    }
  }
}

}  // namespace

std::vector<float> read_floats(const aclTensor& t) {
  std::vector<float> values(static_cast<size_t>(numel(t)));
  for_each_element(t, [&](int64_t i, const char* p) { values[i] = load_float(p, t.dtype); });
  return values;
}

void write_floats(const aclTensor& t, const std::vector<float>& values) {
  for_each_element(t, [&](int64_t i, char* p) { store_float(p, t.dtype, values[i]); });
}

std::vector<int64_t> read_ints(const aclTensor& t) {
  std::vector<int64_t> values(static_cast<size_t>(numel(t)));
  for_each_element(t, [&](int64_t i, const char* p) { values[i] = load_int(p, t.dtype); });
  return values;
}

void write_ints(const aclTensor& t, const std::vector<int64_t>& values) {
  for_each_element(t, [&](int64_t i, char* p) { store_int(p, t.dtype, values[i]); });
}

}  // namespace aclemu
