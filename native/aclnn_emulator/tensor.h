// Reading and writing aclTensor views: element (i_0..i_{n-1}) lives at
// data + (offset + sum i_k * stride_k) * element size, so strided views work as on the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "emulator.h"

namespace aclemu {

// 0 for a value outside aclDataType.
size_t element_size(aclDataType dtype);
std::string dtype_name(aclDataType dtype);
std::string shape_text(const std::vector<int64_t>& dims);

int64_t numel(const std::vector<int64_t>& dims);
inline int64_t numel(const aclTensor& t) { return numel(t.dims); }
bool is_contiguous(const aclTensor& t);
// Whether every element of the view lies inside the storage the tensor was created with.
bool view_fits_storage(const aclTensor& t);

// Whole views in row-major order, converted through float32 / int64.
std::vector<float> read_floats(const aclTensor& t);
void write_floats(const aclTensor& t, const std::vector<float>& values);
std::vector<int64_t> read_ints(const aclTensor& t);
void write_ints(const aclTensor& t, const std::vector<int64_t>& values);

}  // namespace aclemu
