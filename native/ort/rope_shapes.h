// Shape and attribute rules shared by RotaryPositionEmbedding and its grad (contract: cos and sin
// share a shape that broadcasts to dy's, the last axis never broadcast; D suits the mode).
#pragma once

#include "ort/glue.h"

namespace oao {

// Checks the rules for `data` (dy, or the forward's x) of shape `shape` against cos and sin. cos
// has data's rank, as in every aclnn layout (BNSD with 11SD, ..., TND with T1D).
inline Ort::Status check_rope(const char* op, const char* data_name, const Shape& shape, const Shape& cos,
                              const Shape& sin, int64_t mode) {
  if (mode < 0 || mode > 3) {
    return op_error(op, "attribute 'mode' is " + std::to_string(mode) +
                            "; it must be 0 (half), 1 (interleave), 2 (quarter) or 3 (interleave-half)");
  }
  if (shape.empty())
    return op_error(op, std::string("input '") + data_name + "' has rank 0; it needs a last axis D");
  if (cos != sin) {
    return op_error(
        op, "inputs 'cos' " + shape_str(cos) + " and 'sin' " + shape_str(sin) + " must have the same shape");
  }
  const int64_t d = shape.back();
  if (mode == 2 ? d % 4 != 0 : d % 2 != 0) {
    return op_error(op, "the last axis D = " + std::to_string(d) + " of '" + data_name + "' must be " +
                            (mode == 2 ? "a multiple of 4 in mode 2 (quarter)" : "even in modes 0, 1 and 3"));
  }
  bool broadcasts = cos.size() == shape.size() && cos.back() == d;
  for (size_t i = 0; broadcasts && i + 1 < shape.size(); ++i) broadcasts = cos[i] == shape[i] || cos[i] == 1;
  if (!broadcasts) {
    return op_error(op, "input 'cos' " + shape_str(cos) + " must have the rank of '" + data_name + "' " +
                            shape_str(shape) +
                            " and broadcast to it unchanged, the last axis never broadcast");
  }
  return Ort::Status(nullptr);
}

}  // namespace oao
