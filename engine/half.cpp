#include "engine/half.h"

#include <cstring>

namespace ptl {

namespace {

// (Emscripten's C++ library has no std::bit_cast; memcpy compiles to the same move.)
uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace

uint16_t f32_to_f16(float x) {
  const uint32_t u = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return sign | 0x7e00 | static_cast<uint16_t>((a >> 13) & 0x3ff);  // NaN, made quiet
  if (a >= 0x477ff000) return sign | 0x7c00;  // infinity, or at least 65520: rounds past the largest F16
  const uint32_t exp = a >> 23;
  if (exp >= 113) {
    // Normal in F16: rebias the exponent (127 -> 15), drop 13 significand bits, rounding to
    // nearest even. A carry out of the significand correctly bumps the exponent.
    const uint32_t r = a - (112u << 23);
    const uint32_t lsb = (r >> 13) & 1;
    return sign | static_cast<uint16_t>((r + 0xfff + lsb) >> 13);
  }
  // Subnormal or zero in F16. In units of 2^-24 (the F16 subnormal step) the value is
  // m * 2^(exp - 126); below exponent 102 it is under half a step and rounds to zero (as do F32
  // subnormals, exp 0). At exp 102, m = 2^23 is exactly half a step: a tie, to the even 0.
  if (exp < 102) return sign;
  const uint32_t m = (a & 0x7fffff) | 0x800000;
  const uint32_t shift = 126 - exp;  // 14 .. 24
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t up = rem > half || (rem == half && (q & 1));
  return sign | static_cast<uint16_t>(q + up);  // q + up may be 0x400: the smallest normal
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return float_of(sign | 0x7f800000 | (mant << 13));  // inf, NaN
  if (exp != 0) return float_of(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return float_of(sign);
  // Subnormal: normalise. The value is mant * 2^-24; shift the leading 1 up to bit 10.
  uint32_t e = 113;
  while (!(mant & 0x400)) {
    mant <<= 1;
    --e;
  }
  return float_of(sign | (e << 23) | ((mant & 0x3ff) << 13));
}

uint16_t f32_to_bf16(float x) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 0x0040);  // NaN, made quiet
  // Round to nearest even on the low 16 bits; a carry into the exponent is the right result,
  // including the largest finite values rounding up to infinity.
  const uint32_t lsb = (u >> 16) & 1;
  return static_cast<uint16_t>((u + 0x7fff + lsb) >> 16);
}

float bf16_to_f32(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }

}  // namespace ptl
