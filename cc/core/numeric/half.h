// IEEE float16 and bfloat16 <-> float32 conversions, round-to-nearest-even.
// Bit for bit what x86's F16C instructions do, NaN payloads included, so that
// the vector loops (half_bulk.h) and these agree on every input.
// Shared by the reduction kernels and the runtime's float32 staging, so that
// there is exactly one definition of how a half is rounded.
#ifndef TFDIST_CORE_NUMERIC_HALF_H_
#define TFDIST_CORE_NUMERIC_HALF_H_

#include <cstdint>
#include <cstring>

namespace tfdist {

inline float BFloat16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t FloatToBFloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    // inf, or NaN: quietened and its payload kept, as x86's F16C does it.
    bits = sign | 0x7f800000u | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0u);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: normalise into a float32 normal.
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    mantissa &= 0x3ffu;
    bits = sign | (exponent << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {                                // NaN: quiet, top payload bits kept (as F16C)
    return sign | 0x7e00u | static_cast<uint16_t>((magnitude >> 13) & 0x3ffu);
  }
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;         // overflow -> inf
  if (magnitude < 0x38800000u) {                               // half subnormal or zero
    if (magnitude < 0x33000000u) return sign;                  // below half the smallest subnormal
    const uint32_t exponent = magnitude >> 23;
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;                     // 14..24
    uint32_t result = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return sign | static_cast<uint16_t>(result);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits.
  uint32_t result = magnitude - 0x38000000u;
  result += 0xfffu + ((result >> 13) & 1u);
  return sign | static_cast<uint16_t>(result >> 13);
}

}  // namespace tfdist

#endif  // TFDIST_CORE_NUMERIC_HALF_H_
