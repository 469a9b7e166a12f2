// Element storage: every op computes in float32, so each dtype it reads or writes converts
// through float, rounding to nearest even on the way back as the device does.
#pragma once

#include <cstdint>
#include <cstring>

#include "aclnn/acl_abi.h"

namespace aclemu {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet the NaN
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * bits_float(0x33800000u);
    return bits_float(float_bits(magnitude) | sign);
  }
  if (exponent == 31) return bits_float(sign | 0x7F800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// Rounds the dropped low `shift` bits of `value` to nearest, ties to even.
inline uint32_t round_shift(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

inline uint16_t float_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u;
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;              // at or past 65520 rounds to infinity
  if (magnitude >= 0x38800000u) {                                   // normal in float16 (>= 2^-14)
    const uint32_t rebased = magnitude - (112u << 23);              // exponent bias 127 -> 15
    return sign | static_cast<uint16_t>(round_shift(rebased, 13));  // a carry moves into the exponent
  }
  if (magnitude <= 0x33000000u) return sign;  // at most 2^-25: rounds to zero
  // Subnormal: the value in units of 2^-24, from the 24-bit significand.
  const uint32_t exponent = magnitude >> 23;
  const uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  return sign | static_cast<uint16_t>(round_shift(significand, 126 - exponent));
}

inline float load_float(const void* p, aclDataType dtype) {
  switch (dtype) {
    case ACL_FLOAT: {
      float v;
      std::memcpy(&v, p, sizeof v);
      return v;
    }
    case ACL_FLOAT16:
    case ACL_BF16: {
      uint16_t h;
      std::memcpy(&h, p, sizeof h);
      return dtype == ACL_FLOAT16 ? f16_to_float(h) : bf16_to_float(h);
    }
    default:
      return 0.0f;  // unreachable: ops admit only the dtypes above for float data
  }
}

inline void store_float(void* p, aclDataType dtype, float v) {
  if (dtype == ACL_FLOAT) {
    std::memcpy(p, &v, sizeof v);
    return;
  }
  const uint16_t h = dtype == ACL_FLOAT16 ? float_to_f16(v) : float_to_bf16(v);
  std::memcpy(p, &h, sizeof h);
}

inline int64_t load_int(const void* p, aclDataType dtype) {
  if (dtype == ACL_BOOL || dtype == ACL_UINT8) return *static_cast<const uint8_t*>(p);  // masks
  if (dtype == ACL_INT8) return *static_cast<const int8_t*>(p);
  if (dtype == ACL_INT32) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  int64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store_int(void* p, aclDataType dtype, int64_t v) {
  if (dtype == ACL_BOOL) {
    *static_cast<uint8_t*>(p) = v != 0;
    return;
  }
  if (dtype == ACL_UINT8 || dtype == ACL_INT8) {
    *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v);
    return;
  }
  if (dtype == ACL_INT32) {
    const int32_t narrow = static_cast<int32_t>(v);
    std::memcpy(p, &narrow, sizeof narrow);
    return;
  }
  std::memcpy(p, &v, sizeof v);
}

}  // namespace aclemu
