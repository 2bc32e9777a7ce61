#pragma once
// A fused multiply-add of floats that every target rounds the same way (see fma_by_double).
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ptl::cpu {

// fma(a, b, c) rounded once, as PyTorch's vectorised lerp computes it. Where the target has a
// fused multiply-add (x86 with FMA, ARM) std::fma is that instruction. WebAssembly SIMD128 and
// the 128-bit native build (SSE4.2) have none, and std::fma there is a libm call, which keeps
// AdamW's loop from vectorising. The same float from double arithmetic instead: a b is exact
// in double (24 + 24 bits), and a sum rounded to double *to odd* (then to float, to nearest)
// rounds exactly like the exact sum, as double has more than 24 + 2 bits. Round-to-odd from
// round-to-nearest: the error e of s = a b + c (Knuth's TwoSum, exact), and where s is inexact
// with an even last bit, the neighbour of s towards e. Branch-free, so the loop vectorises.
inline float fma_by_double(float a, float b, float c) {
  const double p = double(a) * double(b), z = double(c);
  const double s = p + z;
  const double bp = s - p;
  const double e = (p - (s - bp)) + (z - bp);
  uint64_t bits, ebits;
  std::memcpy(&bits, &s, 8);
  std::memcpy(&ebits, &e, 8);
  // Inexact, even and finite (an infinite or NaN s needs no help, and e is NaN then).
  const uint64_t fix = uint64_t(e != 0.0 && e == e) & ~bits & 1;
  // Towards e: up in magnitude where e has the sign of s, down otherwise.
  const uint64_t down = (ebits ^ bits) >> 63;
  bits += fix - 2 * (fix & down);
  double r;
  std::memcpy(&r, &bits, 8);
  return float(r);
}

// The one used by the kernels: the instruction where there is one, fma_by_double elsewhere.
inline float fma_exact(float a, float b, float c) {
#if defined(__FMA__) || defined(__aarch64__)
  return std::fma(a, b, c);
#else
  return fma_by_double(a, b, c);
#endif
}

}  // namespace ptl::cpu
