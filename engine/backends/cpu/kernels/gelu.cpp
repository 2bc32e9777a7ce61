// Exact GELU: y = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), Phi the standard normal CDF
// (PyTorch's nn.GELU() default, not the tanh approximation).
#include <cmath>

#include "engine/backends/cpu/kernels.h"

namespace ptl::cpu {

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752440f;    // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1 / sqrt(2 pi)
}  // namespace

void gelu_forward(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void gelu_backward(float* dx, bool acc, const float* dy, const float* x, int64_t n) {
    // d/dx [x Phi(x)] = Phi(x) + x phi(x), with phi(x) = exp(-x^2 / 2) / sqrt(2 pi) the normal
    // density.
    for (int64_t i = 0; i < n; i++) {
        const float cdf = 0.5f * (1.0f + std::erf(x[i] * kInvSqrt2));
        const float pdf = std::exp(-0.5f * x[i] * x[i]) * kInvSqrt2Pi;
        const float g = dy[i] * (cdf + x[i] * pdf);
        dx[i] = acc ? dx[i] + g : g;
    }
}

}  // namespace ptl::cpu
