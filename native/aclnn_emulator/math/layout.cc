// libopapi_math.so: the layout functions (aclnnPermute, aclnnExpand, aclnnCat, aclnnSliceV2,
// aclnnFlip, aclnnSplitWithSize, aclnnConstantPadNd, aclnnRepeat, aclnnTriu, aclnnTril,
// aclnnArange, aclnnInplaceFillScalar). Each checks what its page lists for Atlas A2/A3: element
// types, ranks, its host arrays against self's axes, out's shape; most move elements unchanged, so
// they copy raw bytes between strided views of the tensors (int64 stays exact), each view of self
// written as the op sees it (a permuted, broadcast, sliced, reversed or shifted window).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "aclnn/standard/layout_abi.h"
#include "elements.h"
#include "math/common.h"

namespace {

using namespace aclemu;
using namespace aclemu::math;

// The element types of the pages' A2/A3 lists that the emulator stores (no complex types).
constexpr std::initializer_list<aclDataType> kWideTypes = {
    ACL_FLOAT, ACL_FLOAT16, ACL_BF16,   ACL_DOUBLE, ACL_INT8,   ACL_INT16, ACL_INT32,
    ACL_INT64, ACL_UINT8,   ACL_UINT16, ACL_UINT32, ACL_UINT64, ACL_BOOL};
// aclnnExpand's and aclnnSliceV2's lists.
constexpr std::initializer_list<aclDataType> kExpandTypes = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16,  ACL_INT8,
                                                             ACL_UINT8, ACL_INT32,   ACL_INT64, ACL_BOOL};
// aclnnCat's list.
constexpr std::initializer_list<aclDataType> kCatTypes = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16,  ACL_DOUBLE,
                                                          ACL_INT8,  ACL_INT16,   ACL_INT32, ACL_INT64,
                                                          ACL_UINT8, ACL_BOOL};
// aclnnArange's out.
constexpr std::initializer_list<aclDataType> kArangeTypes = {
    ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_DOUBLE, ACL_INT8, ACL_INT16, ACL_INT32, ACL_INT64, ACL_UINT8};

// Calls f(i, address) for each element of the view in row-major order; strides may be 0 (a
// broadcast) or negative (a reversal).
void walk(const aclTensor& t, const std::function<void(int64_t, char*)>& f) {
  const size_t size = element_size(t.dtype);
  const int64_t n = numel(t);
  std::vector<int64_t> position(t.dims.size(), 0);
  int64_t offset = t.offset;
  char* base = static_cast<char*>(t.data);
  for (int64_t i = 0; i < n; ++i) {
    f(i, base + offset * static_cast<int64_t>(size));
    for (size_t k = t.dims.size(); k-- > 0;) {
      if (++position[k] < t.dims[k]) {
        offset += t.strides[k];
        break;
      }
      offset -= t.strides[k] * (t.dims[k] - 1);
      position[k] = 0;
    }
  }
}

// `from` written into `to`, element by element in row-major order (the same dims): raw bytes for
// one element type, else converted through double.
void copy_view(const aclTensor& from, const aclTensor& to) {
  if (from.dtype != to.dtype) {
    write(to, read(from));
    return;
  }
  const size_t size = element_size(from.dtype);
  std::vector<char> bytes(static_cast<size_t>(numel(from)) * size);
  walk(from, [&](int64_t i, char* p) { std::memcpy(&bytes[i * size], p, size); });
  walk(to, [&](int64_t i, char* p) { std::memcpy(p, &bytes[i * size], size); });
}

// One element of `dtype` holding the scalar, as the vendor casts it to self's type.
std::vector<char> element_of(const aclScalar& value, aclDataType dtype) {
  std::vector<char> bytes(element_size(dtype));
  if (is_float(dtype)) {
    if (dtype == ACL_DOUBLE) {
      std::memcpy(bytes.data(), &value.value, sizeof(double));
    } else {
      store_float(bytes.data(), dtype, static_cast<float>(value.value));
    }
  } else if (dtype == ACL_BOOL) {
    bytes[0] = value.value != 0 || value.integer != 0;
  } else {
    const int64_t v = is_float(value.dtype) ? static_cast<int64_t>(value.value) : value.integer;
    std::memcpy(bytes.data(), &v, bytes.size());  // little-endian: the low bytes are the narrow type's
  }
  return bytes;
}

void fill_view(const aclTensor& t, const std::vector<char>& element) {
  walk(t, [&](int64_t, char* p) { std::memcpy(p, element.data(), element.size()); });
}

// The axis `value` names among `rank`, negatives from the end; 161002 naming `what` outside
// [-rank, rank - 1].
int64_t axis_of(int64_t value, size_t rank, const std::string& what) {
  const auto r = static_cast<int64_t>(rank);
  if (value < -r || value >= r) {
    fail(kErrParamInvalid, what + " " + std::to_string(value) + " outside [" + std::to_string(-r) + ", " +
                               std::to_string(r - 1) + "]");
  }
  return value < 0 ? value + r : value;
}

std::vector<int64_t> distinct_axes(const std::vector<int64_t>& values, size_t rank, const char* what) {
  std::vector<int64_t> axes;
  std::vector<bool> seen(rank, false);
  for (const int64_t v : values) {
    const int64_t axis = axis_of(v, rank, what);
    if (seen[axis]) fail(kErrParamInvalid, std::string(what) + " " + shape_text(values) + " repeat an axis");
    seen[axis] = true;
    axes.push_back(axis);
  }
  return axes;
}

// self -> out of self's dtype, `types` allowed, out of `shape`.
void check_same(const aclTensor& self, const aclTensor& out, std::initializer_list<aclDataType> types) {
  check_dtype(self, "self", types);
  check_same_dtype(out, "out", self, "self");
}

Plan permute(const aclTensor* self_p, const aclIntArray* dims_p, const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const std::vector<int64_t> dims = need_array(dims_p, "dims");
  const aclTensor& out = need(out_p, "out");
  check_same(self, out, kWideTypes);
  check_rank(self, "self", 0, 8);
  if (dims.size() != self.dims.size()) {
    fail(kErrParamInvalid, "dims " + shape_text(dims) + " must name each of self's " +
                               std::to_string(self.dims.size()) + " axes once");
  }
  const std::vector<int64_t> axes = distinct_axes(dims, self.dims.size(), "dims");
  aclTensor view = self;
  for (size_t k = 0; k < axes.size(); ++k) {
    view.dims[k] = self.dims[axes[k]];
    view.strides[k] = self.strides[axes[k]];
  }
  check_out_shape(out, "out", view.dims);
  return {{self_p}, {out_p}, [view, out_p] { copy_view(view, *out_p); }};
}

// torch's expand: size aligned to self's trailing axes, -1 keeping self's size there.
Plan expand(const aclTensor* self_p, const aclIntArray* size_p, const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const std::vector<int64_t> size = need_array(size_p, "size");
  const aclTensor& out = need(out_p, "out");
  check_same(self, out, kExpandTypes);
  check_rank(self, "self", 0, 8);
  if (size.size() < self.dims.size() || size.size() > 8) {
    fail(kErrParamInvalid, "size " + shape_text(size) + " must have " + std::to_string(self.dims.size()) +
                               " to 8 values for self " + shape_text(self.dims));
  }
  const size_t lead = size.size() - self.dims.size();
  aclTensor view = self;
  view.dims = size;
  view.strides.assign(size.size(), 0);
  for (size_t k = 0; k < size.size(); ++k) {
    if (k < lead) {
      if (size[k] < 0) fail(kErrParamInvalid, "size " + shape_text(size) + " has -1 on a new leading axis");
      continue;
    }
    const int64_t d = self.dims[k - lead];
    if (size[k] == -1) view.dims[k] = d;
    if (view.dims[k] < 0 || (d != view.dims[k] && d != 1)) {
      fail(kErrParamInvalid,
           "self " + shape_text(self.dims) + " does not broadcast to size " + shape_text(size));
    }
    view.strides[k] = d == view.dims[k] ? self.strides[k - lead] : 0;
  }
  check_out_shape(out, "out", view.dims);
  return {{self_p}, {out_p}, [view, out_p] { copy_view(view, *out_p); }};
}

// Tensors of shape [0] stay out of the join, as torch's cat skips them.
bool skipped(const aclTensor& t) { return t.dims.size() == 1 && t.dims[0] == 0; }

Plan cat(const aclTensorList* tensors_p, int64_t dim, const aclTensor* out_p) {
  if (tensors_p == nullptr) fail(kErrParamNullptr, "tensors is NULL");
  if (!hooks().is_live(Kind::kTensorList, tensors_p))
    fail(kErrParamInvalid, "tensors is not a live aclTensorList");
  const aclTensor& out = need(out_p, "out");
  const std::vector<const aclTensor*> tensors = tensors_p->tensors;
  if (tensors.empty()) fail(kErrParamInvalid, "tensors is empty");
  check_dtype(out, "out", kCatTypes);
  const aclTensor* first = nullptr;
  bool any_float = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = "tensors[" + std::to_string(i) + "]";
    const aclTensor& t = need(tensors[i], name.c_str());
    check_dtype(t, name.c_str(), kCatTypes);
    check_rank(t, name.c_str(), 1, 8);
    any_float = any_float || is_float(t.dtype);
    if (first == nullptr && !skipped(t)) first = &t;
  }
  // The list's promoted type must cast to out: a float list does not go into an integer out.
  if (any_float && !is_float(out.dtype)) {
    fail(kErrParamInvalid, "out dtype " + dtype_name(out.dtype) + " cannot hold the tensors' float type");
  }
  if (first == nullptr) first = tensors[0];
  const size_t rank = first->dims.size();
  const int64_t axis = axis_of(dim, rank, "dim");
  std::vector<int64_t> shape = first->dims;
  shape[axis] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const aclTensor& t = *tensors[i];
    if (skipped(t)) continue;
    bool same = t.dims.size() == rank;
    for (size_t k = 0; same && k < rank; ++k)
      same = static_cast<int64_t>(k) == axis || t.dims[k] == first->dims[k];
    if (!same) {
      fail(kErrParamInvalid, "tensors[" + std::to_string(i) + "] " + shape_text(t.dims) + " differs from " +
                                 shape_text(first->dims) + " outside dim " + std::to_string(axis));
    }
    shape[axis] += t.dims[axis];
  }
  check_out_shape(out, "out", shape);
  auto compute = [tensors, axis, out_p] {
    int64_t at = 0;
    for (const aclTensor* t : tensors) {
      if (skipped(*t)) continue;
      aclTensor window = *out_p;
      window.dims = t->dims;
      window.offset += at * out_p->strides[axis];
      copy_view(*t, window);
      at += t->dims[axis];
    }
  };
  return {tensors, {out_p}, compute};
}

// The page's clamping of one axis's start and end (N its size), then the count of elements.
Plan slice_v2(const aclTensor* self_p, const aclIntArray* starts_p, const aclIntArray* ends_p,
              const aclIntArray* axes_p, const aclIntArray* steps_p, const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const std::vector<int64_t> starts = need_array(starts_p, "starts"), ends = need_array(ends_p, "ends"),
                             axes_given = need_array(axes_p, "axes"), steps = need_array(steps_p, "steps");
  const aclTensor& out = need(out_p, "out");
  check_same(self, out, kExpandTypes);
  check_rank(self, "self", 1, 8);
  if (ends.size() != starts.size() || axes_given.size() != starts.size() || steps.size() != starts.size()) {
    fail(kErrParamInvalid, "starts, ends, axes and steps must have as many elements");
  }
  const std::vector<int64_t> axes = distinct_axes(axes_given, self.dims.size(), "axes");
  aclTensor view = self;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (steps[i] < 1)
      fail(kErrParamInvalid, "steps[" + std::to_string(i) + "] " + std::to_string(steps[i]) + " < 1");
    const int64_t n = self.dims[axes[i]];
    const int64_t start = starts[i] < -n ? 0 : starts[i] >= n ? n : (starts[i] + n) % std::max<int64_t>(n, 1);
    int64_t end = ends[i] >= n ? n : ends[i] < -n ? 0 : (ends[i] + n) % std::max<int64_t>(n, 1);
    if (end < start) end = start;
    view.dims[axes[i]] = (end - start + steps[i] - 1) / steps[i];
    view.offset += start * self.strides[axes[i]];
    view.strides[axes[i]] *= steps[i];
  }
  check_out_shape(out, "out", view.dims);
  return {{self_p}, {out_p}, [view, out_p] { copy_view(view, *out_p); }};
}

Plan flip(const aclTensor* self_p, const aclIntArray* dims_p, const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const std::vector<int64_t> dims = need_array(dims_p, "dims");
  const aclTensor& out = need(out_p, "out");
  check_same(self, out, kCatTypes);
  check_rank(self, "self", 1, 8);
  aclTensor view = self;
  for (const int64_t axis : distinct_axes(dims, self.dims.size(), "dims")) {
    view.offset += (self.dims[axis] - 1) * self.strides[axis];
    view.strides[axis] = -self.strides[axis];
  }
  check_out_shape(out, "out", self.dims);
  return {{self_p}, {out_p}, [view, out_p] { copy_view(view, *out_p); }};
}

Plan split_with_size(const aclTensor* self_p, const aclIntArray* sizes_p, int64_t dim,
                     const aclTensorList* out_p) {
  const aclTensor& self = need(self_p, "self");
  const std::vector<int64_t> sizes = need_array(sizes_p, "splitSize");
  if (out_p == nullptr) fail(kErrParamNullptr, "out is NULL");
  if (!hooks().is_live(Kind::kTensorList, out_p)) fail(kErrParamInvalid, "out is not a live aclTensorList");
  const std::vector<const aclTensor*> outs = out_p->tensors;
  check_dtype(self, "self", kCatTypes);
  check_rank(self, "self", 1, 8);
  const int64_t axis = axis_of(dim, self.dims.size(), "dim");
  int64_t total = 0;
  for (const int64_t s : sizes) {
    if (s < 0) fail(kErrParamInvalid, "splitSize " + shape_text(sizes) + " has a negative size");
    total += s;
  }
  if (total != self.dims[axis]) {
    fail(kErrParamInvalid, "splitSize " + shape_text(sizes) + " sums to " + std::to_string(total) +
                               ", not self's " + std::to_string(self.dims[axis]) + " along dim " +
                               std::to_string(axis));
  }
  if (outs.size() != sizes.size()) {
    fail(kErrParamInvalid, "out has " + std::to_string(outs.size()) + " tensors for " +
                               std::to_string(sizes.size()) + " sizes");
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string name = "out[" + std::to_string(i) + "]";
    const aclTensor& o = need(outs[i], name.c_str());
    check_same_dtype(o, name.c_str(), self, "self");
    std::vector<int64_t> want = self.dims;
    want[axis] = sizes[i];
    check_out_shape(o, name.c_str(), want);
  }
  auto compute = [self_p, outs, axis] {
    int64_t at = 0;
    for (const aclTensor* o : outs) {
      aclTensor window = *self_p;
      window.dims = o->dims;
      window.offset += at * self_p->strides[axis];
      copy_view(window, *o);
      at += o->dims[axis];
    }
  };
  return {{self_p}, outs, compute};
}

Plan constant_pad_nd(const aclTensor* self_p, const aclIntArray* pad_p, const aclScalar* value_p,
                     const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const std::vector<int64_t> pad = need_array(pad_p, "pad");
  const aclScalar& value = need_scalar(value_p, "value");
  const aclTensor& out = need(out_p, "out");
  check_same(self, out, kWideTypes);
  const size_t rank = self.dims.size();
  if (pad.size() % 2 != 0 || pad.size() > 2 * rank) {
    fail(kErrParamInvalid, "pad " + shape_text(pad) + " must have an even length of at most " +
                               std::to_string(2 * rank) + " (twice self's axes)");
  }
  // pad[2j], pad[2j + 1]: the (begin, end) of axis rank - 1 - j.
  std::vector<int64_t> shape = self.dims, begin(rank, 0), end(rank, 0);
  for (size_t j = 0; j < pad.size() / 2; ++j) {
    const size_t k = rank - 1 - j;
    begin[k] = pad[2 * j];
    end[k] = pad[2 * j + 1];
    shape[k] += begin[k] + end[k];
    if (shape[k] < 0) {
      fail(kErrParamInvalid, "pad " + shape_text(pad) + " makes axis " + std::to_string(k) + " negative");
    }
  }
  check_out_shape(out, "out", shape);
  const std::vector<char> element = element_of(value, out.dtype);
  auto compute = [self_p, out_p, begin, end, element] {
    fill_view(*out_p, element);
    // The part of self that survives the crops, and where it lands in out.
    aclTensor from = *self_p, to = *out_p;
    for (size_t k = 0; k < begin.size(); ++k) {
      const int64_t cut_begin = std::max<int64_t>(-begin[k], 0), cut_end = std::max<int64_t>(-end[k], 0);
      from.dims[k] = std::max<int64_t>(self_p->dims[k] - cut_begin - cut_end, 0);
      to.dims[k] = from.dims[k];
      from.offset += cut_begin * self_p->strides[k];
      to.offset += std::max<int64_t>(begin[k], 0) * out_p->strides[k];
    }
    if (numel(from) > 0) copy_view(from, to);
  };
  return {{self_p}, {out_p}, compute};
}

// out as [r0, d0, r1, d1, ...] (each axis of out split into repeat and self's size), written from
// self broadcast along the repeat axes.
Plan repeat(const aclTensor* self_p, const aclIntArray* repeats_p, const aclTensor* out_p) {
  const aclTensor& self = need(self_p, "self");
  const std::vector<int64_t> repeats = need_array(repeats_p, "repeats");
  const aclTensor& out = need(out_p, "out");
  check_same(self, out, kWideTypes);
  check_rank(self, "self", 0, 8);
  if (repeats.size() < self.dims.size()) {
    fail(kErrParamInvalid, "repeats " + shape_text(repeats) + " has fewer values than self " +
                               shape_text(self.dims) + " has axes");
  }
  const size_t lead = repeats.size() - self.dims.size();
  std::vector<int64_t> shape(repeats.size());
  for (size_t k = 0; k < repeats.size(); ++k) {
    if (repeats[k] < 0) fail(kErrParamInvalid, "repeats " + shape_text(repeats) + " has a negative value");
    shape[k] = repeats[k] * (k < lead ? 1 : self.dims[k - lead]);
  }
  check_out_shape(out, "out", shape);
  auto compute = [self_p, out_p, repeats, lead] {
    aclTensor from = *self_p, to = *out_p;
    from.dims.clear(), from.strides.clear(), to.dims.clear(), to.strides.clear();
    for (size_t k = 0; k < repeats.size(); ++k) {
      const int64_t d = k < lead ? 1 : self_p->dims[k - lead];
      const int64_t s = k < lead ? 0 : self_p->strides[k - lead];
      from.dims.insert(from.dims.end(), {repeats[k], d});
      from.strides.insert(from.strides.end(), {0, s});
      to.dims.insert(to.dims.end(), {repeats[k], d});
      to.strides.insert(to.strides.end(), {d * out_p->strides[k], out_p->strides[k]});
    }
    copy_view(from, to);
  };
  return {{self_p}, {out_p}, compute};
}

// The last two axes' triangle: kept where col - row >= diagonal (upper) or <= diagonal (lower).
Plan triangular(const aclTensor* self_p, int64_t diagonal, const aclTensor* out_p, bool upper) {
  const aclTensor& self = need(self_p, "self");
  const aclTensor& out = need(out_p, "out");
  check_same(self, out, kWideTypes);
  if (self.dims.size() == 1) fail(kErrTiling, "self rank 1 outside 2..8 (or 0)");
  check_rank(self, "self", 0, 8);
  check_out_shape(out, "out", self.dims);
  auto compute = [self_p, out_p, diagonal, upper] {
    copy_view(*self_p, *out_p);
    const size_t rank = out_p->dims.size();
    if (rank < 2) return;
    const int64_t rows = out_p->dims[rank - 2], cols = out_p->dims[rank - 1];
    const size_t size = element_size(out_p->dtype);
    walk(*out_p, [&](int64_t i, char* p) {
      const int64_t col = i % cols, row = (i / cols) % rows;
      if (upper ? col - row < diagonal : col - row > diagonal) std::memset(p, 0, size);  // zero in every type
    });
  };
  return {{self_p}, {out_p}, compute};
}

Plan arange(const aclScalar* start_p, const aclScalar* end_p, const aclScalar* step_p,
            const aclTensor* out_p) {
  const aclScalar& start = need_scalar(start_p, "start");
  const aclScalar& end = need_scalar(end_p, "end");
  const aclScalar& step = need_scalar(step_p, "step");
  const aclTensor& out = need(out_p, "out");
  check_dtype(out, "out", kArangeTypes);
  const bool exact = !is_float(start.dtype) && !is_float(end.dtype) && !is_float(step.dtype);
  const double s = start.value, e = end.value, d = step.value;
  if (d == 0) fail(kErrParamInvalid, "step is 0");
  if ((d > 0 && !(s < e)) || (d < 0 && !(s > e))) {
    fail(kErrParamInvalid, "start " + std::to_string(s) + " and end " + std::to_string(e) +
                               " do not run in step " + std::to_string(d) + "'s direction");
  }
  int64_t count = 0;
  if (exact) {
    const __int128 span = static_cast<__int128>(end.integer) - start.integer;
    const int64_t by = step.integer;
    count = static_cast<int64_t>(by > 0 ? (span + by - 1) / by : (span + by + 1) / by);
  } else {
    count = static_cast<int64_t>(std::ceil((e - s) / d));
  }
  check_rank(out, "out", 1, 1);
  check_out_shape(out, "out", {count});
  auto compute = [out_p, exact, first = start.integer, by = step.integer, s, d] {
    const size_t size = element_size(out_p->dtype);
    walk(*out_p, [&](int64_t i, char* p) {
      if (is_float(out_p->dtype)) {
        const double v = s + static_cast<double>(i) * d;
        if (out_p->dtype == ACL_DOUBLE) {
          std::memcpy(p, &v, size);
        } else {
          store_float(p, out_p->dtype, static_cast<float>(v));
        }
      } else {
        store_int(p, out_p->dtype,
                  exact ? first + i * by : static_cast<int64_t>(s + static_cast<double>(i) * d));
      }
    });
  };
  return {{}, {out_p}, compute};
}

Plan inplace_fill_scalar(const aclTensor* self_p, const aclScalar* value_p) {
  const aclTensor& self = need(self_p, "selfRef");
  const aclScalar& value = need_scalar(value_p, "value");
  check_dtype(self, "selfRef", kWideTypes);
  check_rank(self, "selfRef", 0, 8);
  const std::vector<char> element = element_of(value, self.dtype);
  return {{}, {self_p}, [self_p, element] { fill_view(*self_p, element); }};
}

}  // namespace

#define ACLEMU_INT_ARRAY_OP(name, body)                                                    \
  ACLEMU_TWO_PHASES(name,                                                                  \
                    (const aclTensor* self, const aclIntArray* dims, const aclTensor* out, \
                     uint64_t* workspaceSize, aclOpExecutor** executor),                   \
                    body(self, dims, out))                                                 \
  static_assert(std::is_same_v<decltype(&name##GetWorkspaceSize), oao::acl::IntArrayPrepare>);

ACLEMU_INT_ARRAY_OP(aclnnPermute, permute)
ACLEMU_INT_ARRAY_OP(aclnnExpand, expand)
ACLEMU_INT_ARRAY_OP(aclnnFlip, flip)
ACLEMU_INT_ARRAY_OP(aclnnRepeat, repeat)

ACLEMU_TWO_PHASES(aclnnCat,
                  (const aclTensorList* tensors, int64_t dim, const aclTensor* out, uint64_t* workspaceSize,
                   aclOpExecutor** executor),
                  cat(tensors, dim, out))
static_assert(std::is_same_v<decltype(&aclnnCatGetWorkspaceSize), oao::acl::CatPrepare>);

ACLEMU_TWO_PHASES(aclnnSliceV2,
                  (const aclTensor* self, const aclIntArray* starts, const aclIntArray* ends,
                   const aclIntArray* axes, const aclIntArray* steps, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  slice_v2(self, starts, ends, axes, steps, out))
static_assert(std::is_same_v<decltype(&aclnnSliceV2GetWorkspaceSize), oao::acl::SliceV2Prepare>);

ACLEMU_TWO_PHASES(aclnnSplitWithSize,
                  (const aclTensor* self, const aclIntArray* splitSize, int64_t dim, const aclTensorList* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  split_with_size(self, splitSize, dim, out))
static_assert(std::is_same_v<decltype(&aclnnSplitWithSizeGetWorkspaceSize), oao::acl::SplitWithSizePrepare>);

ACLEMU_TWO_PHASES(aclnnConstantPadNd,
                  (const aclTensor* self, const aclIntArray* pad, const aclScalar* value,
                   const aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor),
                  constant_pad_nd(self, pad, value, out))
static_assert(std::is_same_v<decltype(&aclnnConstantPadNdGetWorkspaceSize), oao::acl::ConstantPadNdPrepare>);

ACLEMU_TWO_PHASES(aclnnTriu,
                  (const aclTensor* self, int64_t diagonal, const aclTensor* out, uint64_t* workspaceSize,
                   aclOpExecutor** executor),
                  triangular(self, diagonal, out, true))
static_assert(std::is_same_v<decltype(&aclnnTriuGetWorkspaceSize), oao::acl::TriangularPrepare>);

ACLEMU_TWO_PHASES(aclnnTril,
                  (const aclTensor* self, int64_t diagonal, const aclTensor* out, uint64_t* workspaceSize,
                   aclOpExecutor** executor),
                  triangular(self, diagonal, out, false))
static_assert(std::is_same_v<decltype(&aclnnTrilGetWorkspaceSize), oao::acl::TriangularPrepare>);

ACLEMU_TWO_PHASES(aclnnArange,
                  (const aclScalar* start, const aclScalar* end, const aclScalar* step, const aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor),
                  arange(start, end, step, out))
static_assert(std::is_same_v<decltype(&aclnnArangeGetWorkspaceSize), oao::acl::ArangePrepare>);

ACLEMU_TWO_PHASES(aclnnInplaceFillScalar,
                  (const aclTensor* selfRef, const aclScalar* value, uint64_t* workspaceSize,
                   aclOpExecutor** executor),
                  inplace_fill_scalar(selfRef, value))
static_assert(
    std::is_same_v<decltype(&aclnnInplaceFillScalarGetWorkspaceSize), oao::acl::InplaceFillScalarPrepare>);
