#pragma once
// Portable SIMD for the CPU kernels: GCC/Clang vector extensions.
//
// `vf` is a vector of kW floats, kW being the native width of the target: 16 with AVX-512,
// 8 with AVX2, 4 otherwise (SSE2, WebAssembly SIMD128 with -msimd128, NEON). Arithmetic on vf
// is written with the ordinary operators (a * b + c, a > b); the compiler maps it to the
// target's instructions, contracts a * b + c into an FMA where the target has one, and lowers
// it to scalar code where there is no SIMD at all. So one source serves -march=native and
// emcc -msimd128 alike, with no intrinsics and no dependency. docs/cpu-backend.md says why this
// was chosen over intrinsics, auto-vectorisation alone, or a SIMD library.
//
// The math functions (exp, erf) are branch-free polynomials, accurate to a couple of ulp
// (exp) and 1.5e-7 absolute (erf, the same Abramowitz-Stegun formula as PyTorch's vectorised
// CPU erf), so that element-wise kernels vectorise completely.
#include <cstdint>
#include <cstring>
#if defined(__FMA__)
#include <immintrin.h>
#endif

namespace ptl::cpu::simd {

#if defined(__AVX512F__)
constexpr int kW = 16;
#elif defined(__AVX2__) || defined(__AVX__)
constexpr int kW = 8;
#else
constexpr int kW = 4;
#endif

typedef float vf __attribute__((vector_size(kW * 4)));
typedef int32_t vi __attribute__((vector_size(kW * 4)));  // also the type of vf comparisons

// Unaligned loads and stores (memcpy of a whole vector compiles to one vector move).
inline vf load(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
inline vf splat(float x) { return x - vf{}; }  // x - (+0) is exactly x, so this folds to a broadcast

// a * b + c rounded once where the target has a fused multiply-add, else rounded twice. The
// compiler contracts a * b + c on its own only where it chooses to: GCC left one instantiation of
// the matrix kernel (a 1-row tile with AVX2) as a multiply and an add, so a token's outputs
// depended on how many rows shared its tile. A kernel whose floats must not depend on the plan
// says fmadd.
inline vf fmadd(vf a, vf b, vf c) {
#if defined(__AVX512F__)
  return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__)  // FMA implies AVX: kW is 8
  return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
  return a * b + c;
#endif
}

// Lane-wise select: m ? a : b, m a comparison result (all ones or all zeros per lane).
inline vf select(vi m, vf a, vf b) { return (vf)((m & (vi)a) | (~m & (vi)b)); }
inline vf vmax(vf a, vf b) { return select(a > b, a, b); }
inline vf vmin(vf a, vf b) { return select(a < b, a, b); }
inline vf vabs(vf a) { return (vf)((vi)a & 0x7fffffff); }

// Sum of the lanes, lane 0 first (a fixed order, so results never depend on alignment).
inline float hsum(vf v) {
  float s = v[0];
  for (int l = 1; l < kW; l++) s += v[l];
  return s;
}
inline float hmax(vf v) {
  float s = v[0];
  for (int l = 1; l < kW; l++) s = v[l] > s ? v[l] : s;
  return s;
}

// exp(x): x = n ln2 + r with |r| <= ln2 / 2, exp(r) by Cephes' degree-6 polynomial, 2^n built in
// the exponent bits. Inputs below about -87.3 give 0 (or a tiny number); -inf gives 0.
inline vf exp(vf x) {
  x = vmin(vmax(x, splat(-87.6f)), splat(88.37f));
  // n = round(x / ln2) with the 1.5 * 2^23 trick: adding it leaves n in the low mantissa bits.
  const vf magic = splat(12582912.0f);
  vf fn = x * 1.44269504088896341f + magic;
  const vi n = (vi)fn - (vi)magic;
  fn = fn - magic;
  // r = x - n ln2, with ln2 split in two so that n * ln2_hi is exact.
  vf r = x - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  vf p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const vf er = p * (r * r) + r + 1.0f;
  // 2^n: n + 127 in the exponent field (n >= -127 after the clamp; -127 gives 0).
  const vf pow2n = (vf)((n + 127) << 23);
  return er * pow2n;
}

// erf(x), Abramowitz and Stegun 7.1.26 (|error| <= 1.5e-7), as PyTorch's Vectorized<float>::erf:
// erf(x) = sign(x) (1 - t (a1 + t (a2 + ...)) exp(-x^2)), t = 1 / (1 + p |x|).
// exp(-x^2) is handed back too: with x = z / sqrt 2 it is the normal density's exp(-z^2 / 2),
// which GELU's derivative needs next to erf, so it costs no second exp there.
inline vf erf(vf x, vf& exp_neg_x2) {
  const vi sign = (vi)x & (int32_t)0x80000000;
  const vf ax = vabs(x);
  const vf t = 1.0f / (ax * 0.3275911f + 1.0f);
  vf r = t * 1.061405429f + -1.453152027f;
  r = r * t + 1.421413741f;
  r = r * t + -0.284496736f;
  r = r * t + 0.254829592f;
  exp_neg_x2 = exp(-(x * x));
  const vf y = (-exp_neg_x2 * t) * r + 1.0f;
  return (vf)((vi)y ^ sign);
}
inline vf erf(vf x) {
  vf unused;
  return erf(x, unused);
}

// Scalar versions through the same code, for loop tails (so a tail element gets exactly the
// value it would get inside a vector).
inline float exp1(float x) { return exp(splat(x))[0]; }
inline float erf1(float x) { return erf(splat(x))[0]; }

}  // namespace ptl::cpu::simd
