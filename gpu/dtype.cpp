#include "gpu/dtype.hpp"

namespace brigade::gpu {

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: shift the implicit-one mantissa into place, rounding to even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;
    uint32_t half = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1);
    const uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

void to_f32(dtype t, const void* src, float* dst, size_t count) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  switch (t) {
    case dtype::f32:
      std::memcpy(dst, src, count * sizeof(float));
      return;
    case dtype::bf16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t v;
        std::memcpy(&v, bytes + 2 * i, 2);
        dst[i] = bf16_to_f32(v);
      }
      return;
    case dtype::f16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t v;
        std::memcpy(&v, bytes + 2 * i, 2);
        dst[i] = f16_to_f32(v);
      }
      return;
  }
}

}  // namespace brigade::gpu
