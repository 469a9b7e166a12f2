// Element types the kernels store, and their conversions to and from float32, the type every
// kernel computes and accumulates in.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace oao {

// Storage-only 16-bit types: layout-compatible with ONNX Runtime's Ort::Float16_t and
// Ort::BFloat16_t, so the ORT glue can hand their buffers to the kernels unchanged.
struct half {
  uint16_t bits;
};
struct bfloat16 {
  uint16_t bits;
};

inline float to_float(float v) { return v; }

inline float to_float(half v) {
  _Float16 h;  // a libgcc call on the plain paths; the AVX2 paths convert with F16C themselves
  std::memcpy(&h, &v.bits, sizeof h);
  return static_cast<float>(h);
}

inline float to_float(bfloat16 v) {
  const uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <class T>
T from_float(float v);

template <>
inline float from_float<float>(float v) {
  return v;
}

template <>
inline half from_float<half>(float v) {
  const _Float16 h = static_cast<_Float16>(v);  // round to nearest even
  half out;
  std::memcpy(&out.bits, &h, sizeof h);
  return out;
}

template <>
inline bfloat16 from_float<bfloat16>(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  // Round to nearest even on the dropped 16 bits; a NaN stays a (quiet) NaN instead of rounding
  // into infinity.
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return bfloat16{static_cast<uint16_t>(std::isnan(v) ? quiet_nan : rounded)};
}

}  // namespace oao
