// LayerNorm over the last dimension C: y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps),
// with the biased variance (divide by C) as PyTorch uses.
//
// Rows are independent, so the forward and dx are threaded over rows. dw and db are sums over
// all rows: they are summed per chunk of kChunk rows (a size fixed here, not by the thread
// count) into one partial per chunk, and the partials are added in chunk order at the end, so
// the result does not depend on which thread did which chunk.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/simd.h"
#include "engine/backends/cpu/thread_pool.h"

namespace ptl::cpu {

namespace {

using simd::kW;
using simd::vf;

constexpr int64_t kChunk = 32;  // rows per task (and per dw/db partial)

// sum_c f(c) over a row, in kW lanes plus a scalar tail, lanes added in a fixed order.
template <class F>
float row_sum(int64_t C, F f) {
  vf acc = vf{};
  int64_t c = 0;
  for (; c + kW <= C; c += kW) acc += f.vec(c);
  float tail = 0.0f;
  for (; c < C; c++) tail += f.one(c);
  return simd::hsum(acc) + tail;
}

}  // namespace

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t N,
                       int64_t C, float eps) {
  parallel_ranges(N, std::max<int64_t>(1, grain_for(N, 8 * C)), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; i++) {
      const float* xi = x + i * C;
      // Two passes: the mean first, then the squared deviations from it. The one-pass
      // E[x^2] - E[x]^2 cancels catastrophically when |mean| >> std.
      struct Sum {
        const float* x;
        vf vec(int64_t c) const { return simd::load(x + c); }
        float one(int64_t c) const { return x[c]; }
      };
      const float m = row_sum(C, Sum{xi}) / static_cast<float>(C);
      struct Sq {
        const float* x;
        float m;
        vf vec(int64_t c) const {
          const vf d = simd::load(x + c) - m;
          return d * d;
        }
        float one(int64_t c) const {
          const float d = x[c] - m;
          return d * d;
        }
      };
      const float var = row_sum(C, Sq{xi, m}) / static_cast<float>(C);
      const float s = 1.0f / std::sqrt(var + eps);
      float* yi = y + i * C;
      for (int64_t c = 0; c < C; c++) yi[c] = (xi[c] - m) * s * w[c] + b[c];
      if (mean) mean[i] = m;
      if (rstd) rstd[i] = s;
    }
  });
}

void layernorm_backward(float* dx, bool acc_dx, float* dw, bool acc_dw, float* db, bool acc_db, const float* dy,
                        const float* x, const float* w, const float* mean, const float* rstd, int64_t N, int64_t C) {
  // With xhat = (x - mean) * rstd and g = dy * w (the gradient reaching xhat):
  //   db = sum over rows of dy,  dw = sum over rows of dy * xhat,
  //   dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)).
  // The two row means come from differentiating through mean and rstd, which depend on every
  // x of the row: the first removes the component along (1, ..., 1), the second the component
  // along xhat.
  const int64_t chunks = (N + kChunk - 1) / kChunk;
  std::vector<float> part_w(dw ? size_t(chunks * C) : 0), part_b(db ? size_t(chunks * C) : 0);
  parallel_for(chunks, [&](int64_t k) {
    float* pw = dw ? part_w.data() + k * C : nullptr;
    float* pb = db ? part_b.data() + k * C : nullptr;
    if (pw) std::fill(pw, pw + C, 0.0f);
    if (pb) std::fill(pb, pb + C, 0.0f);
    for (int64_t i = k * kChunk; i < std::min(N, (k + 1) * kChunk); i++) {
      const float* xi = x + i * C;
      const float* dyi = dy + i * C;
      const float m = mean[i];
      const float s = rstd[i];
      for (int64_t c = 0; c < C; c++) {
        const float xhat = (xi[c] - m) * s;
        if (pw) pw[c] += dyi[c] * xhat;
        if (pb) pb[c] += dyi[c];
      }
      if (!dx) continue;
      struct G {
        const float *x, *dy, *w;
        vf vec(int64_t c) const { return simd::load(dy + c) * simd::load(w + c); }
        float one(int64_t c) const { return dy[c] * w[c]; }
      };
      struct GX {
        const float *x, *dy, *w;
        float m, s;
        vf vec(int64_t c) const { return simd::load(dy + c) * simd::load(w + c) * ((simd::load(x + c) - m) * s); }
        float one(int64_t c) const { return dy[c] * w[c] * ((x[c] - m) * s); }
      };
      const float g_mean = row_sum(C, G{xi, dyi, w}) / static_cast<float>(C);
      const float gx_mean = row_sum(C, GX{xi, dyi, w, m, s}) / static_cast<float>(C);
      float* dxi = dx + i * C;
      for (int64_t c = 0; c < C; c++) {
        const float xhat = (xi[c] - m) * s;
        const float v = s * (dyi[c] * w[c] - g_mean - xhat * gx_mean);
        dxi[c] = acc_dx ? dxi[c] + v : v;
      }
    }
  });
  // The chunk partials, added in chunk order (in double: N / kChunk terms per column).
  auto reduce = [&](float* out, bool acc, const std::vector<float>& part) {
    parallel_ranges(C, 64, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; c++) {
        double s = 0.0;
        for (int64_t k = 0; k < chunks; k++) s += part[size_t(k * C + c)];
        out[c] = (acc ? out[c] : 0.0f) + static_cast<float>(s);
      }
    });
  };
  if (dw) reduce(dw, acc_dw, part_w);
  if (db) reduce(db, acc_db, part_b);
}

}  // namespace ptl::cpu
