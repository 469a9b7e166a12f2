// libopapi_math.so: the index family's functions (native/aclnn/standard/index.cc calls them):
// aclnnGatherV2, aclnnGather, aclnnGatherNd, aclnnScatter, aclnnIndexPutImpl. Each first phase
// checks what its page lists for Atlas A2/A3 (NULL pointers 161001; element types, ranks, dims,
// shapes 161002). Index values are the device's to read: they are checked at launch, where one out
// of range fails the work (the stream reports it at its next wait) before anything is written, and
// nothing outside the tensors is touched. Gathers and plain scatters move elements' bytes (exact
// for every type); reductions go through double (floats) or int64 (integers, bools).
// INT16, DOUBLE and the unsigned types beyond UINT8, which the standard ops never pass, are not
// emulated where a function computes on the values.
#include <cstring>
#include <type_traits>

#include "aclnn/standard/index_abi.h"
#include "math/common.h"

namespace {

using namespace aclemu;
using namespace aclemu::math;

constexpr size_t kMaxRank = 8;
constexpr std::initializer_list<aclDataType> kIndexTypes = {ACL_INT32, ACL_INT64};
// What a gather copies: every type of the pages with an element size here (no complex types).
constexpr std::initializer_list<aclDataType> kCopyTypes = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT32,
                                                           ACL_INT64, ACL_INT16,   ACL_INT8, ACL_UINT8,
                                                           ACL_BOOL,  ACL_DOUBLE};

void check_max_rank(const aclTensor& t, const char* name) {
  if (t.dims.size() > kMaxRank) {
    fail(kErrParamInvalid, std::string(name) + " has " + std::to_string(t.dims.size()) + " dims (at most 8)");
  }
}

void check_dims(const aclTensor& t, const char* name, const std::vector<int64_t>& want,
                const std::string& rule) {
  if (t.dims != want) {
    fail(kErrParamInvalid, std::string(name) + " shape " + shape_text(t.dims) + " must be " +
                               shape_text(want) + " (" + rule + ")");
  }
}

// `dim` of a tensor of `rank` dims (a 0-d tensor counts as 1), counted from the end when negative.
int64_t wrap_dim(int64_t dim, size_t rank) {
  const int64_t r = std::max<int64_t>(static_cast<int64_t>(rank), 1);
  if (dim < -r || dim >= r) {
    fail(kErrParamInvalid, "dim " + std::to_string(dim) + " outside [" + std::to_string(-r) + ", " +
                               std::to_string(r - 1) + "]");
  }
  return dim < 0 ? dim + r : dim;
}

// An index value checked at launch against an axis of `size`, moved into [0, size): from_end
// admits [-size, size), else [0, size).
int64_t checked(int64_t value, int64_t size, bool from_end, const char* name) {
  const int64_t lo = from_end ? -size : 0;
  if (value < lo || value >= size) {
    fail(kErrRuntime, std::string(name) + " holds " + std::to_string(value) + ", outside [" +
                          std::to_string(lo) + ", " + std::to_string(size - 1) + "] of the axis it indexes");
  }
  return value < 0 ? value + size : value;
}

// Bytes from data to each element of a view, in row-major order.
std::vector<int64_t> byte_offsets(const aclTensor& t) {
  const auto size = static_cast<int64_t>(element_size(t.dtype));
  std::vector<int64_t> offsets(static_cast<size_t>(numel(t)));
  std::vector<int64_t> position(t.dims.size(), 0);
  int64_t element = t.offset;
  for (auto& offset : offsets) {
    offset = element * size;
    for (size_t k = t.dims.size(); k-- > 0;) {
      if (++position[k] < t.dims[k]) {
        element += t.strides[k];
        break;
      }
      element -= t.strides[k] * (t.dims[k] - 1);
      position[k] = 0;
    }
  }
  return offsets;
}

// Copies element `from` (row-major) of `src` to element `to` of `dst`, of one element type.
struct ByteMover {
  ByteMover(const aclTensor& src, const aclTensor& dst)
      : src(src), dst(dst), from(byte_offsets(src)), to(byte_offsets(dst)), size(element_size(src.dtype)) {}
  void move(int64_t from_element, int64_t to_element) const {
    std::memcpy(static_cast<char*>(dst.data) + to[to_element],
                static_cast<const char*>(src.data) + from[from_element], size);
  }
  const aclTensor& src;
  const aclTensor& dst;
  std::vector<int64_t> from, to;
  size_t size;
};

// The row-major index in `dims` of each row-major position of `shape` (each no longer than dims).
std::vector<int64_t> positions_in(const std::vector<int64_t>& shape, const std::vector<int64_t>& dims) {
  const std::vector<int64_t> strides = contiguous_strides(dims);
  std::vector<int64_t> out(static_cast<size_t>(numel(shape)));
  std::vector<int64_t> position(shape.size(), 0);
  int64_t at = 0;
  for (auto& entry : out) {
    entry = at;
    for (size_t k = shape.size(); k-- > 0;) {
      if (++position[k] < shape[k]) {
        at += strides[k];
        break;
      }
      at -= strides[k] * (shape[k] - 1);
      position[k] = 0;
    }
  }
  return out;
}

// For each element of index (row-major), the row-major position in `dims` (self's) it names:
// index's own position off dim d, its value (checked against dims[d]) along it.
std::vector<int64_t> along_dim(const aclTensor& index, const std::vector<int64_t>& dims, int64_t d,
                               const std::vector<int64_t>& idx, int64_t size, int64_t stride) {
  std::vector<int64_t> at = positions_in(index.dims, dims);
  const int64_t index_stride = index.dims.empty() ? 1 : contiguous_strides(index.dims)[d];
  const int64_t index_size = index.dims.empty() ? 1 : index.dims[d];
  for (size_t i = 0; i < idx.size(); ++i) {
    const int64_t own = (static_cast<int64_t>(i) / index_stride) % index_size;
    at[i] += (checked(idx[i], size, false, "index") - own) * stride;
  }
  return at;
}

Plan gather_v2(const aclTensor* self_p, int64_t dim, const aclTensor* index_p, const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& index = need(index_p, "index");
  const aclTensor& out = need(out_p, "out");
  check_dtype(self, "self", kCopyTypes);
  check_dtype(index, "index", kIndexTypes);
  check_same_dtype(out, "out", self, "self");
  check_max_rank(self, "self");
  check_max_rank(index, "index");
  const int64_t d = wrap_dim(dim, self.dims.size());
  std::vector<int64_t> shape = self.dims;  // a 0-d self gives a 0-d out
  if (!self.dims.empty()) {
    shape.assign(self.dims.begin(), self.dims.begin() + d);
    if (index.dims.empty()) shape.push_back(1);
    shape.insert(shape.end(), index.dims.begin(), index.dims.end());
    shape.insert(shape.end(), self.dims.begin() + d + 1, self.dims.end());
  }
  check_dims(out, "out", shape, "self's with dim replaced by index's");
  auto compute = [self_p, index_p, out_p, d] {
    if (numel(*self_p) == 0 || numel(*index_p) == 0) return;  // the vendor's early return
    const bool scalar = self_p->dims.empty();
    const int64_t size = scalar ? 1 : self_p->dims[d];
    std::vector<int64_t> idx = read_ints(*index_p);
    for (auto& v : idx) v = checked(v, size, true, "index");
    const ByteMover mover(*self_p, *out_p);
    if (scalar) return mover.move(0, 0);
    const int64_t outer = numel(std::vector<int64_t>(self_p->dims.begin(), self_p->dims.begin() + d));
    const int64_t inner = numel(std::vector<int64_t>(self_p->dims.begin() + d + 1, self_p->dims.end()));
    const auto n = static_cast<int64_t>(idx.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < inner; ++i)
          mover.move((o * size + idx[j]) * inner + i, (o * n + j) * inner + i);
      }
    }
  };
  return {{self_p, index_p}, {out_p}, compute};
}

// torch.gather's and torch.scatter's rule: index of self's rank, no longer than self off dim.
void check_along(const aclTensor& self, const char* self_name, const aclTensor& index, int64_t d) {
  if (index.dims.size() != self.dims.size()) {
    fail(kErrParamInvalid, "index has " + std::to_string(index.dims.size()) + " dims, " + self_name + " " +
                               std::to_string(self.dims.size()));
  }
  for (size_t k = 0; k < self.dims.size(); ++k) {
    if (static_cast<int64_t>(k) != d && index.dims[k] > self.dims[k]) {
      fail(kErrParamInvalid, "index " + shape_text(index.dims) + " is longer than " + self_name + " " +
                                 shape_text(self.dims) + " in dim " + std::to_string(k));
    }
  }
}

Plan gather(const aclTensor* self_p, int64_t dim, const aclTensor* index_p, const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& index = need(index_p, "index");
  const aclTensor& out = need(out_p, "out");
  check_dtype(self, "self", kCopyTypes);
  check_dtype(index, "index", kIndexTypes);
  check_same_dtype(out, "out", self, "self");
  check_max_rank(self, "self");
  check_max_rank(index, "index");
  check_max_rank(out, "out");
  const int64_t d = wrap_dim(dim, self.dims.size());
  check_along(self, "self", index, d);
  check_dims(out, "out", index.dims, "index's shape");
  if (numel(index) > 0 && !self.dims.empty() && self.dims[d] == 0) {
    fail(kErrParamInvalid, "index has elements but self is empty in dim " + std::to_string(d));
  }
  auto compute = [self_p, index_p, out_p, d] {
    if (numel(*index_p) == 0) return;
    const std::vector<int64_t>& dims = self_p->dims;
    const int64_t size = dims.empty() ? 1 : dims[d];
    const int64_t stride = dims.empty() ? 0 : contiguous_strides(dims)[d];
    const std::vector<int64_t> idx = read_ints(*index_p);
    std::vector<int64_t> from = along_dim(*index_p, dims, d, idx, size, stride);
    const ByteMover mover(*self_p, *out_p);
    for (size_t i = 0; i < idx.size(); ++i) mover.move(from[i], static_cast<int64_t>(i));
  };
  return {{self_p, index_p}, {out_p}, compute};
}

Plan gather_nd(const aclTensor* self_p, const aclTensor* indices_p, bool negative, const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& indices = need(indices_p, "indices");
  const aclTensor& out = need(out_p, "out");
  check_dtype(self, "self",
              {ACL_INT64, ACL_INT32, ACL_INT8, ACL_UINT8, ACL_BOOL, ACL_FLOAT, ACL_FLOAT16, ACL_BF16});
  check_dtype(indices, "indices", kIndexTypes);
  check_same_dtype(out, "out", self, "self");
  for (const auto& [t, name] : {std::pair{&self, "self"}, std::pair{&indices, "indices"}}) {
    if (t->dims.empty() || t->dims.size() > kMaxRank) {
      fail(kErrParamInvalid, std::string(name) + " has " + std::to_string(t->dims.size()) + " dims (1 to 8)");
    }
  }
  const int64_t k = indices.dims.back();
  if (k < 1 || k > static_cast<int64_t>(self.dims.size())) {
    fail(kErrParamInvalid, "indices' last dim " + std::to_string(k) + " outside [1, " +
                               std::to_string(self.dims.size()) + "], self's rank");
  }
  std::vector<int64_t> shape(indices.dims.begin(), indices.dims.end() - 1);
  shape.insert(shape.end(), self.dims.begin() + k, self.dims.end());
  check_dims(out, "out", shape, "indices' but the last, then self's past the first indices.shape[-1]");
  auto compute = [self_p, indices_p, out_p, negative, k] {
    if (numel(*self_p) == 0 || numel(*indices_p) == 0) return;
    const std::vector<int64_t>& dims = self_p->dims;
    const std::vector<int64_t> strides = contiguous_strides(dims);
    const int64_t slice = numel(std::vector<int64_t>(dims.begin() + k, dims.end()));
    const std::vector<int64_t> idx = read_ints(*indices_p);
    std::vector<int64_t> starts(idx.size() / static_cast<size_t>(k), 0);
    for (size_t t = 0; t < starts.size(); ++t) {
      for (int64_t j = 0; j < k; ++j) {
        starts[t] += checked(idx[t * k + j], dims[j], negative, "indices") * strides[j];
      }
    }
    const ByteMover mover(*self_p, *out_p);
    for (size_t t = 0; t < starts.size(); ++t) {
      for (int64_t s = 0; s < slice; ++s) mover.move(starts[t] + s, static_cast<int64_t>(t) * slice + s);
    }
  };
  return {{self_p, indices_p}, {out_p}, compute};
}

// acc[to[i]] = acc[to[i]] (op) values[from[i]], in order (repeated targets accumulate).
template <class V>
void reduce_into(std::vector<V>& acc, const std::vector<V>& values, const std::vector<int64_t>& to,
                 const std::vector<int64_t>& from, int64_t op) {
  for (size_t i = 0; i < to.size(); ++i) {
    V& target = acc[to[i]];
    const V v = values[from[i]];
    target = op == 0 ? v : op == 1 ? target + v : target * v;
  }
}

// out = self, then out[to[i]] (op) src[from[i]] for each i: 0 replaces, 1 adds, 2 multiplies.
void scatter_values(const aclTensor& self, const aclTensor& src, const aclTensor& out,
                    const std::vector<int64_t>& to, const std::vector<int64_t>& from, int64_t op) {
  if (is_float(self.dtype)) {
    std::vector<double> acc = read(self);
    reduce_into(acc, read(src), to, from, op);
    write(out, acc);
  } else {
    std::vector<int64_t> acc = read_ints(self);
    reduce_into(acc, read_ints(src), to, from, op);
    write_ints(out, acc);
  }
}

Plan scatter(const aclTensor* self_p, int64_t dim, const aclTensor* index_p, const aclTensor* src_p,
             int64_t reduce, const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& index = need(index_p, "index");
  const aclTensor& src = need(src_p, "src");
  const aclTensor& out = need(out_p, "out");
  check_dtype(self, "self", kAllTypes);
  check_dtype(index, "index", kIndexTypes);
  check_same_dtype(src, "src", self, "self");
  check_same_dtype(out, "out", self, "self");
  check_max_rank(self, "self");
  if (reduce < 0 || reduce > 2) fail(kErrParamInvalid, "reduce " + std::to_string(reduce) + " outside 0..2");
  const int64_t d = wrap_dim(dim, self.dims.size());
  check_along(self, "self", index, d);
  if (src.dims.size() != self.dims.size())
    fail(kErrParamInvalid, "src and self differ in their number of dims");
  for (size_t k = 0; k < index.dims.size(); ++k) {
    if (index.dims[k] > src.dims[k]) {
      fail(kErrParamInvalid, "index " + shape_text(index.dims) + " is longer than src " +
                                 shape_text(src.dims) + " in dim " + std::to_string(k));
    }
  }
  check_dims(out, "out", self.dims, "self's shape");
  auto compute = [self_p, index_p, src_p, out_p, d, reduce] {
    if (numel(*out_p) == 0) return;
    const std::vector<int64_t>& dims = self_p->dims;
    std::vector<int64_t> to, from;
    if (numel(*index_p) > 0) {
      const int64_t size = dims.empty() ? 1 : dims[d];
      const int64_t stride = dims.empty() ? 0 : contiguous_strides(dims)[d];
      const std::vector<int64_t> idx = read_ints(*index_p);
      to = along_dim(*index_p, dims, d, idx, size, stride);
      from = positions_in(index_p->dims, src_p->dims);
    }
    if (reduce != 0) return scatter_values(*self_p, *src_p, *out_p, to, from, reduce);
    const ByteMover copy(*self_p, *out_p), put(*src_p, *out_p);
    for (int64_t i = 0; i < numel(*out_p); ++i) copy.move(i, i);
    for (size_t i = 0; i < to.size(); ++i) put.move(from[i], to[i]);
  };
  return {{self_p, index_p, src_p}, {out_p}, compute};
}

Plan index_put(const aclTensor* self_p, const aclTensorList* indices_p, const aclTensor* values_p,
               bool accumulate) {
  const aclTensor& self = need(self_p, "selfRef");
  if (indices_p == nullptr) fail(kErrParamNullptr, "indices is NULL");
  if (!hooks().is_live(Kind::kTensorList, indices_p))
    fail(kErrParamInvalid, "indices is not a live aclTensorList");
  const aclTensor& values = need(values_p, "values");
  check_dtype(self, "selfRef", kAllTypes);
  check_same_dtype(values, "values", self, "selfRef");
  check_max_rank(self, "selfRef");
  const std::vector<const aclTensor*> list = indices_p->tensors;
  if (list.size() > self.dims.size()) {
    fail(kErrParamInvalid, "indices holds " + std::to_string(list.size()) + " tensors, more than selfRef's " +
                               std::to_string(self.dims.size()) + " dims");
  }
  std::vector<int64_t> tuples;  // the indices' broadcast shape
  for (size_t j = 0; j < list.size(); ++j) {
    const std::string name = "indices[" + std::to_string(j) + "]";
    const aclTensor& t = need(list[j], name.c_str());
    if (t.dtype == ACL_BOOL) {
      fail(kErrParamInvalid, name + " is a bool mask (not emulated: the standard ops never pass one)");
    }
    check_dtype(t, name.c_str(), kIndexTypes);
    aclTensor shaped = t;
    shaped.dims = tuples;
    tuples = j == 0 ? t.dims : broadcast_shape(shaped, "the indices before it", t, name.c_str());
  }
  std::vector<int64_t> target = tuples;
  target.insert(target.end(), self.dims.begin() + static_cast<int64_t>(list.size()), self.dims.end());
  // values broadcast to indices' broadcast shape, then selfRef's dims past the indexed ones.
  bool spreads = values.dims.size() <= target.size();
  for (size_t k = 0; spreads && k < values.dims.size(); ++k) {
    const int64_t v = values.dims[values.dims.size() - 1 - k], t = target[target.size() - 1 - k];
    spreads = v == t || v == 1;
  }
  if (!spreads) {
    fail(kErrParamInvalid, "values " + shape_text(values.dims) + " does not broadcast to " +
                               shape_text(target) +
                               " (indices' broadcast shape, then selfRef's dims past the indexed ones)");
  }
  std::vector<const aclTensor*> ins{self_p};
  ins.insert(ins.end(), list.begin(), list.end());
  ins.push_back(values_p);
  auto compute = [self_p, list, values_p, accumulate, tuples, target] {
    if (numel(*self_p) == 0 || numel(*values_p) == 0 || list.empty()) return;  // the vendor's early returns
    const std::vector<int64_t>& dims = self_p->dims;
    const std::vector<int64_t> strides = contiguous_strides(dims);
    const int64_t slice =
        numel(std::vector<int64_t>(dims.begin() + static_cast<int64_t>(list.size()), dims.end()));
    std::vector<int64_t> starts(static_cast<size_t>(numel(tuples)), 0);
    for (size_t j = 0; j < list.size(); ++j) {
      const std::vector<int64_t> idx = read_ints(*list[j]);
      const std::vector<int64_t> at = broadcast_index(tuples, list[j]->dims);
      for (size_t t = 0; t < starts.size(); ++t) {
        starts[t] += checked(idx[at[t]], dims[j], true, "indices") * strides[j];
      }
    }
    std::vector<int64_t> to(static_cast<size_t>(numel(target)));
    for (size_t t = 0; t < starts.size(); ++t) {
      for (int64_t s = 0; s < slice; ++s) to[t * slice + s] = starts[t] + s;
    }
    scatter_values(*self_p, *values_p, *self_p, to, broadcast_index(target, values_p->dims),
                   accumulate ? 1 : 0);
  };
  return {ins, {self_p}, compute};
}

}  // namespace

ACLEMU_TWO_PHASES(aclnnGatherV2,
                  (const aclTensor* self, int64_t dim, const aclTensor* index, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  gather_v2(self, dim, index, out))
static_assert(std::is_same_v<decltype(&aclnnGatherV2GetWorkspaceSize), oao::acl::GatherDimPrepare>);

ACLEMU_TWO_PHASES(aclnnGather,
                  (const aclTensor* self, int64_t dim, const aclTensor* index, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  gather(self, dim, index, out))
static_assert(std::is_same_v<decltype(&aclnnGatherGetWorkspaceSize), oao::acl::GatherDimPrepare>);

ACLEMU_TWO_PHASES(aclnnGatherNd,
                  (const aclTensor* self, const aclTensor* indices, bool negativeIndexSupport,
                   const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor),
                  gather_nd(self, indices, negativeIndexSupport, out))
static_assert(std::is_same_v<decltype(&aclnnGatherNdGetWorkspaceSize), oao::acl::GatherNdPrepare>);

ACLEMU_TWO_PHASES(aclnnScatter,
                  (const aclTensor* self, int64_t dim, const aclTensor* index, const aclTensor* src,
                   int64_t reduce, const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor),
                  scatter(self, dim, index, src, reduce, out))
static_assert(std::is_same_v<decltype(&aclnnScatterGetWorkspaceSize), oao::acl::ScatterPrepare>);

// unsafe asks for the range check; without it the page promises a runtime exception on an index
// out of range: the launch fails either way.
ACLEMU_TWO_PHASES(aclnnIndexPutImpl,
                  (const aclTensor* selfRef, const aclTensorList* indices, const aclTensor* values,
                   bool accumulate, bool unsafe, uint64_t* workspaceSize, aclOpExecutor** executor),
                  [&] {
                    (void)unsafe;
                    return index_put(selfRef, indices, values, accumulate);
                  }())
static_assert(std::is_same_v<decltype(&aclnnIndexPutImplGetWorkspaceSize), oao::acl::IndexPutImplPrepare>);
