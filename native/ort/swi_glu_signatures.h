// What SwiGlu and SwiGluGrad look like to ONNX Runtime on every execution provider: slot types, the
// dim attribute and the contract's shape rules (rank(x) >= 1, dim in [-rank, rank), x.shape[dim]
// even, dy = x's shape with x.shape[dim] halved).
#pragma once

#include "ort/io.h"
#include "ort/schema.h"

namespace oao {

// x viewed as [outer, 2, half] (kernels/swi_glu_halves.h).
struct GluGeometry {
  size_t axis = 0;
  int64_t outer = 0, half = 0;
  Shape y;  // x's shape with x.shape[axis] halved
};

inline Ort::Status glu_geometry(const char* op, const Shape& x, int64_t dim, GluGeometry& g) {
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0) return op_error(op, "input 'x' has rank 0; it must have rank >= 1");
  if (dim < -rank || dim >= rank) {
    return op_error(op, "attribute 'dim' is " + std::to_string(dim) + "; it must be in [-rank(x), rank(x)) = [" +
                            std::to_string(-rank) + ", " + std::to_string(rank) + ")");
  }
  g.axis = static_cast<size_t>(dim < 0 ? dim + rank : dim);
  if (x[g.axis] % 2 != 0) {
    return op_error(op, "input 'x' has shape " + shape_str(x) + ": x.shape[" + std::to_string(dim) + "] = " +
                            std::to_string(x[g.axis]) + " is odd; it must be cut in two equal halves");
  }
  g.y = x;
  g.y[g.axis] /= 2;
  g.outer = element_count(x, 0, g.axis);
  g.half = element_count(g.y, g.axis, g.y.size());
  return Ort::Status(nullptr);
}

template <class T>
struct SwiGluTypes : Signature {
  static constexpr TypeOf kTypes[] = {{"T", element_type<T>()}};
};

template <class T>
struct SwiGluSignature : SwiGluTypes<T> {
  using Schema = schema::SwiGlu;
  static constexpr const char* kName = Schema::kName;

  explicit SwiGluSignature(const OrtKernelInfo* info) : dim(attribute<int64_t>(info, "dim").value_or(Schema::kDim)) {}

  struct Args {
    Input<T> x;
    GluGeometry g;
  };
  // The inputs, checked against the contract.
  Ort::Status read(const Io& io, Args& a) const {
    a.x = io.input<T>(Schema::kInput_x);
    return glu_geometry(kName, a.x.shape, dim, a.g);
  }

  int64_t dim;
};

template <class T>
struct SwiGluGradSignature : SwiGluTypes<T> {
  using Schema = schema::SwiGluGrad;
  static constexpr const char* kName = Schema::kName;

  explicit SwiGluGradSignature(const OrtKernelInfo* info)
      : dim(attribute<int64_t>(info, "dim").value_or(Schema::kDim)) {}

  struct Args {
    Input<T> dy, x;
    GluGeometry g;
  };
  // The inputs, checked against the contract.
  Ort::Status read(const Io& io, Args& a) const {
    a.dy = io.input<T>(Schema::kInput_dy);
    a.x = io.input<T>(Schema::kInput_x);
    if (auto status = glu_geometry(kName, a.x.shape, dim, a.g); !status.IsOK()) return status;
    if (a.dy.shape != a.g.y) {
      return op_error(kName, "input 'dy' has shape " + shape_str(a.dy.shape) + "; it must be x's shape with x.shape[" +
                                 std::to_string(dim) + "] halved, " + shape_str(a.g.y));
    }
    return Ort::Status(nullptr);
  }

  int64_t dim;
};

}  // namespace oao
