// aclnnRotaryPositionEmbedding(Grad)'s limits beyond the contract, per product family (their
// pages). The pages name layouts (BNSD, BSND, SBND, TND) that the op cannot see; what they allow
// comes down to which leading axes cos may broadcast along, and the axes it broadcasts along are
// the batch and head axes, which is what the B and N limits are checked on. Limits that need the
// layout itself (B < S for B1SD and BS1D) are left to the vendor library.
#pragma once

#include <numeric>
#include <vector>

#include "aclnn/call.h"
#include "aclnn/limits.h"
#include "aclnn/standard/layout_abi.h"

namespace oao {

struct RotaryPositionEmbeddingCall {
  const char* op;
  const char* data_name;  // "x" or "dy"
  bool grad;
  bool sums;  // dcos and dsin are computed
  bool bfloat16;
};

// cos's leading axes: true where it keeps dy's size, false where it broadcasts (size 1). An axis
// dy itself has at size 1 matches either.
inline bool matches(const Shape& data, const Shape& cos, const std::vector<bool>& keeps) {
  for (size_t i = 0; i < keeps.size(); ++i) {
    if (keeps[i] ? cos[i] != data[i] : cos[i] != 1) return false;
  }
  return true;
}

inline bool any_matches(const Shape& data, const Shape& cos, const std::vector<std::vector<bool>>& patterns) {
  for (const auto& keeps : patterns)
    if (keeps.size() + 1 == data.size() && matches(data, cos, keeps)) return true;
  return false;
}

// A2/A3: half mode takes 11SD, B1SD, BNSD, 1S1D, BS1D, S11D, SB1D, SBND (and T1D, TND); interleave
// only the position-only forms 11SD, 1S1D, S11D, T1D.
inline Ort::Status check_rope_atlas(const RotaryPositionEmbeddingCall& c, const Shape& data, const Shape& cos,
                                    int64_t mode) {
  const std::string where = std::string(" on ") + acl::family_name(acl::Family::kA2) + "/A3";
  if (mode > 1) {  // mode 3 arrives here as mode 0 (rotary_position_embedding_layout.h)
    return op_error(c.op, "attribute 'mode' is " + std::to_string(mode) + "; aclnn" + c.op +
                              " supports modes 0 (half) and 1 (interleave)" + where +
                              " (and mode 3 through mode 0), mode 2 needs Ascend 950");
  }
  const int64_t d = data.back();
  if (d >= 896) {
    return op_error(c.op, std::string("the last axis D = ") + std::to_string(d) + " of '" + c.data_name +
                              "' must be below 896" + where);
  }
  const std::vector<std::vector<bool>> half = {
      {false, false, true}, {true, false, true},  {true, true, true}, {false, true, false},
      {true, true, false},  {true, false, false}, {true, false},      {true, true}};
  const std::vector<std::vector<bool>> interleave = {
      {false, false, true}, {false, true, false}, {true, false, false}, {true, false}};
  if (!any_matches(data, cos, mode == 0 ? half : interleave)) {
    return op_error(c.op, "input 'cos' " + shape_str(cos) + " is not a layout aclnn" + c.op + " takes for '" +
                              c.data_name + "' " + shape_str(data) + " in mode " + std::to_string(mode) +
                              where +
                              (mode == 0 ? " (11SD, B1SD, 1S1D, BS1D, S11D, SB1D, full, T1D or TND)"
                                         : " (11SD, 1S1D, S11D or T1D)"));
  }
  int64_t broadcast_product = 1;
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    if (cos[i] != 1 || data[i] == 1) continue;
    broadcast_product *= data[i];
    if (mode == 0 && data[i] >= 1000) {
      return op_error(c.op, std::string("the batch and head axes of '") + c.data_name +
                                "' must be below 1000 in mode 0" + where + "; axis " + std::to_string(i) +
                                " is " + std::to_string(data[i]));
    }
  }
  if (mode == 1 && broadcast_product >= 1000) {
    return op_error(c.op, std::string("B * N of '") + c.data_name + "' must be below 1000 in mode 1" + where +
                              "; it is " + std::to_string(broadcast_product));
  }
  if (mode == 0 && c.sums && broadcast_product > 1024) {
    return op_error(c.op, "B * N must be at most 1024 when dcos and dsin are computed" + where + "; it is " +
                              std::to_string(broadcast_product));
  }
  return Ort::Status(nullptr);
}

inline Ort::Status check_rope_product(const RotaryPositionEmbeddingCall& c, acl::Family family,
                                      const Shape& data, const Shape& cos, int64_t mode) {
  using acl::Family;
  if (auto status = check_rank(c.op, c.data_name, data, 3, 4); !status.IsOK()) return status;
  const int64_t d = data.back();
  switch (family) {
    case Family::kA2:
    case Family::kA3:
      return check_rope_atlas(c, data, cos, mode);
    case Family::k950:
      if (c.grad && data.size() != 4) return check_rank(c.op, c.data_name, data, 4, 4);
      if (d > 1024) {
        return op_error(c.op,
                        "the last axis D = " + std::to_string(d) + " must be at most 1024 on Ascend 950");
      }
      return Ort::Status(nullptr);
    case Family::kInference:
      if (c.grad) return not_supported_on(c.op, family);
      if (mode != 0 || c.bfloat16 || d > 128 || d % 32 != 0) {
        return op_error(
            c.op, std::string("on ") + acl::family_name(family) + " aclnn" + c.op +
                      " takes mode 0, float16 or float32, and D a multiple of 32 up to 128; got mode " +
                      std::to_string(mode) + ", D = " + std::to_string(d) + (c.bfloat16 ? ", bfloat16" : ""));
      }
      return Ort::Status(nullptr);
    case Family::kOther:
      return not_supported_on(c.op, family);
    case Family::kUnknown:
      break;
  }
  return Ort::Status(nullptr);
}

// Mode 3 (interleave-half) where the chip's aclnnRotaryPositionEmbedding(Grad) lacks it: the
// vendor's pages give modes 2 and 3 on Ascend 950 only, and an A2/A3 runs mode 3 as what it means,
// mode 0 on the de-interleaved last axis, with the de-interleave (and, for the gradient, its
// inverse) as an aclnnPermute on the device.
inline bool rope_through_half_mode(acl::Family family, int64_t mode) {
  return mode == 3 && (family == acl::Family::kA2 || family == acl::Family::kA3);
}

// `src` [..., D] into `dst` with its last axis read as [D/2, 2] and written as [2, D/2]
// (de-interleaved: even elements, then odd ones), or back when `deinterleave` is false.
inline Ort::Status rope_permute_last_axis(AclnnCall& call, const void* src, void* dst, const Shape& shape,
                                          aclDataType type, bool deinterleave) {
  Shape pairs(shape.begin(), shape.end() - 1), halves = pairs;
  pairs.insert(pairs.end(), {shape.back() / 2, 2});
  halves.insert(halves.end(), {2, shape.back() / 2});
  std::vector<int64_t> perm(pairs.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  const Shape& from = deinterleave ? pairs : halves;
  const Shape& to = deinterleave ? halves : pairs;
  return call.run<acl::IntArrayPrepare>("aclnnPermute", call.tensor(src, from, type), call.int_array(perm),
                                        call.tensor(dst, to, type));
}

}  // namespace oao
