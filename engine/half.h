#pragma once
// IEEE 754 binary16 (F16) and bfloat16 (BF16): the two 16-bit storage formats of a
// half-precision checkpoint (docs/checkpoint-format.md). Narrowing rounds to nearest, ties to
// even, as every framework does, so a file written here matches one written by PyTorch's
// `.half()` / `.bfloat16()`; widening is exact (every F16 and BF16 value is an F32 value).
// Integer arithmetic only: the result does not depend on the FPU's rounding mode or on
// flush-to-zero settings.
#include <cstdint>

namespace ptl {

// Finite values beyond the F16 range round to infinity (from 65520 up, the first value that
// rounds past 65504); values below half the smallest subnormal (2^-25) round to a signed zero.
// A NaN stays a NaN (quiet, sign and high payload bits kept).
uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t h);

// BF16 is the high half of an F32: the same range, 8 bits of significand.
uint16_t f32_to_bf16(float x);
float bf16_to_f32(uint16_t h);

}  // namespace ptl
