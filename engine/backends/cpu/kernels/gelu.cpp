// Exact GELU: y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), Phi the standard normal CDF
// (PyTorch's nn.GELU() default, not the tanh approximation).
//
// Vectorised with simd::erf and simd::exp (the formulas PyTorch's vectorised CPU kernel uses),
// threaded over contiguous ranges; every element is independent, so the split cannot change
// any result. The tail of a range goes through the same vector code on a padded copy.
#include <algorithm>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/simd.h"
#include "engine/backends/cpu/thread_pool.h"

namespace ptl::cpu {

namespace {

using simd::kW;
using simd::vf;

constexpr float kInvSqrt2 = 0.70710678118654752440f;    // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1 / sqrt(2 pi)

inline vf gelu(vf x) { return 0.5f * x * (1.0f + simd::erf(x * kInvSqrt2)); }

// d/dx [x Phi(x)] = Phi(x) + x phi(x), with phi(x) = exp(-x^2 / 2) / sqrt(2 pi) the normal density.
// erf(x / sqrt 2) computes that exp on its way: taken from it, the backward has one exp per
// element instead of two, and the exps are most of its arithmetic.
inline vf gelu_grad(vf x) {
  vf exp_half_x2;  // exp(-(x / sqrt 2)^2) = exp(-x^2 / 2)
  const vf cdf = 0.5f * (1.0f + simd::erf(x * kInvSqrt2, exp_half_x2));
  return cdf + x * (exp_half_x2 * kInvSqrt2Pi);
}

// Loads n < kW floats, zero-filling the rest.
inline vf load_part(const float* p, int64_t n) {
  float buf[kW] = {};
  std::copy(p, p + n, buf);
  return simd::load(buf);
}
inline void store_part(float* p, vf v, int64_t n) {
  float buf[kW];
  simd::store(buf, v);
  std::copy(buf, buf + n, p);
}

}  // namespace

void gelu_forward(float* y, const float* x, int64_t n) {
  parallel_ranges(n, grain_for(n, 30), [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + kW <= i1; i += kW) simd::store(y + i, gelu(simd::load(x + i)));
    if (i < i1) store_part(y + i, gelu(load_part(x + i, i1 - i)), i1 - i);
  });
}

void gelu_backward(float* dx, bool acc, const float* dy, const float* x, int64_t n) {
  parallel_ranges(n, grain_for(n, 40), [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + kW <= i1; i += kW) {
      vf g = simd::load(dy + i) * gelu_grad(simd::load(x + i));
      if (acc) g += simd::load(dx + i);
      simd::store(dx + i, g);
    }
    if (i < i1) {
      const int64_t r = i1 - i;
      vf g = load_part(dy + i, r) * gelu_grad(load_part(x + i, r));
      if (acc) g += load_part(dx + i, r);
      store_part(dx + i, g, r);
    }
  });
}

}  // namespace ptl::cpu
