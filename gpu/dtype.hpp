// Element types of weights in checkpoint files, and exact conversions to float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace brigade::gpu {

/// Weight storage types. Activations are always float32.
enum class dtype : uint8_t { f32, bf16, f16 };

inline size_t dtype_size(dtype t) {
  return t == dtype::f32 ? 4 : 2;
}

inline std::string_view dtype_name(dtype t) {
  switch (t) {
    case dtype::f32:
      return "float32";
    case dtype::bf16:
      return "bfloat16";
    case dtype::f16:
      return "float16";
  }
  return "?";
}

/// bfloat16 is the upper half of a float32: widening is exact.
inline float bf16_to_f32(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

/// IEEE half to float32, exact (subnormals, infinities and NaN included).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: normalise the mantissa into a float32 exponent.
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// Round-to-nearest-even float32 to bfloat16 (used when writing generated checkpoints).
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

/// Round-to-nearest-even float32 to IEEE half (used when writing generated checkpoints).
uint16_t f32_to_f16(float f);

/// Converts `count` elements of type `t` at `src` (any alignment) to float32.
void to_f32(dtype t, const void* src, float* dst, size_t count);

}  // namespace brigade::gpu
