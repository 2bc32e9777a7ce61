// GELU, two forms (ModelConfig::gelu):
// - exact: y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), Phi the standard normal CDF (PyTorch's
//   nn.GELU() default);
// - tanh: GPT-2's approximation (Hugging Face's gelu_new, nn.GELU(approximate="tanh")),
//   y = 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3).
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

constexpr float kSqrt2OverPi = 0.79788456080286535588f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;

// 0.5 (1 + tanh(u)) is the logistic function of 2u, s = 1 / (1 + e) with e = exp(-2u): one exp,
// no cancellation where tanh(u) is +-1 less a tiny amount, and the same in WGSL (gelu.wgsl).
// simd::exp clamps its argument, so e stays finite (beyond the clamp s is below 1e-38 anyway).
inline vf exp_minus_2u(vf x) { return simd::exp(-2.0f * kSqrt2OverPi * (x + kCubic * (x * x * x))); }
inline vf gelu_tanh(vf x) { return x / (1.0f + exp_minus_2u(x)); }

// d/dx [x s] = s + x ds/dx, with ds/dx = 0.5 (1 - tanh^2 u) u' = 2 s (1 - s) u' = 2 e s^2 u'
// (1 - s = e s, exact where 1 - s would cancel) and u' = sqrt(2 / pi) (1 + 3 * 0.044715 x^2).
// Beyond |x| = 20 the derivative is 0 or 1 to fp32 precision: x is clamped there, so that x^2
// stays finite for any input (an infinite u' times a vanishing s would give inf or NaN).
inline vf gelu_tanh_grad(vf x) {
  x = simd::vmax(simd::vmin(x, simd::splat(20.0f)), simd::splat(-20.0f));
  const vf e = exp_minus_2u(x);
  const vf s = 1.0f / (1.0f + e);
  const vf du = kSqrt2OverPi * (1.0f + (3.0f * kCubic) * (x * x));
  return s + x * (2.0f * ((e * s) * s) * du);
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

// One pass over [0, n) of `f` (an element-wise forward) in threads, whole vectors then a padded tail.
template <class F>
void forward_pass(float* y, const float* x, int64_t n, F f) {
  parallel_ranges(n, grain_for(n, 30), [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + kW <= i1; i += kW) simd::store(y + i, f(simd::load(x + i)));
    if (i < i1) store_part(y + i, f(load_part(x + i, i1 - i)), i1 - i);
  });
}

// dx (+)= dy * grad(x).
template <class G>
void backward_pass(float* dx, bool acc, const float* dy, const float* x, int64_t n, G grad) {
  parallel_ranges(n, grain_for(n, 40), [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + kW <= i1; i += kW) {
      vf g = simd::load(dy + i) * grad(simd::load(x + i));
      if (acc) g += simd::load(dx + i);
      simd::store(dx + i, g);
    }
    if (i < i1) {
      const int64_t r = i1 - i;
      vf g = load_part(dy + i, r) * grad(load_part(x + i, r));
      if (acc) g += load_part(dx + i, r);
      store_part(dx + i, g, r);
    }
  });
}

}  // namespace

void gelu_forward(float* y, const float* x, int64_t n, Gelu kind) {
  if (kind == Gelu::tanh) return forward_pass(y, x, n, [](vf v) { return gelu_tanh(v); });
  forward_pass(y, x, n, [](vf v) { return gelu(v); });
}

void gelu_backward(float* dx, bool acc, const float* dy, const float* x, int64_t n, Gelu kind) {
  if (kind == Gelu::tanh) return backward_pass(dx, acc, dy, x, n, [](vf v) { return gelu_tanh_grad(v); });
  backward_pass(dx, acc, dy, x, n, [](vf v) { return gelu_grad(v); });
}

}  // namespace ptl::cpu
