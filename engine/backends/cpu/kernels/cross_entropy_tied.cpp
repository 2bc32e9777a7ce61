// The tied output projection and the cross-entropy in one op:
//   z = x W^T                 the logits [M, V]; W is the token embedding [V, C] (weight tying)
//   loss = sum_i mask_i (lse_i - z[i, t_i]) / sum_i mask_i,   lse_i = log sum_v exp z[i, v]
// computed over chunks of the vocabulary so that z is never held whole: with GPT-2's 50,257
// tokens, [M, V] floats would be the largest tensor of a training step by far. Chunk c's logits
// z_c = x W_c^T [M, Vc] come from linear.cpp's matrix product on rows v0 .. v0 + Vc of W, and are
// folded into a running maximum and sum of each row (the online log-sum-exp):
//   m' = max(m, max_v z_c[i, v]),   s' = s exp(m - m') + sum_v exp(z_c[i, v] - m').
// The backward recomputes each chunk's logits, turns them in place into
//   dz_c = (softmax - onehot) * mask_i / sum(mask),   softmax = exp(z - lse) (the forward's lse),
// and adds dx += dz_c W_c and dW_c = dz_c^T x with linear.cpp's backward products. Memory grows
// with V only through W and its gradient (and their AdamW moments).
//
// With a single chunk (V up to about 2 MiB of logits, e.g. V = 256 at the Medium preset) every
// float is the one cross_entropy.cpp and linear.cpp compute on the stored logits, and the
// executor runs a training program's forward and backward ops together
// (cross_entropy_tied_forward_backward), so that the logits are computed once, as they were when
// they were stored. The chunk width depends on M and V only, so the results are bitwise the same
// for any thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/backends/cpu/gemm.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/simd.h"
#include "engine/backends/cpu/thread_pool.h"

namespace ptl::cpu {

namespace {

using simd::kW;
using simd::vf;

// Logits of one chunk held at once (2 MiB): the rows each core handles stay in its L2 between the
// product that writes them and the pass that reads them.
constexpr int64_t kChunkFloats = int64_t(1) << 19;
// Chunks start at multiples of 64 vocabulary rows (whole panels of the matrix product at every
// vector width; the WGSL executor's buffer offsets need 256-byte steps too).
constexpr int64_t kChunkStep = 64;

thread_local std::vector<float> t_logits;

// max_v z[v], vectorised (the maximum does not depend on the order).
float row_max(const float* z, int64_t n) {
  int64_t v = 0;
  float mx = z[0];
  if (n >= kW) {
    vf m = simd::load(z);
    for (v = kW; v + kW <= n; v += kW) m = simd::vmax(m, simd::load(z + v));
    mx = simd::hmax(m);
  }
  for (; v < n; v++) mx = std::max(mx, z[v]);
  return mx;
}

// sum_v exp(z[v] - m): lanes, then the tail, in a fixed order (cross_entropy.cpp's log_sum_exp).
float sum_exp(const float* z, int64_t n, float m) {
  int64_t v = 0;
  vf sum = vf{};
  for (; v + kW <= n; v += kW) sum += simd::exp(simd::load(z + v) - m);
  float s = simd::hsum(sum);
  for (; v < n; v++) s += simd::exp1(z[v] - m);
  return s;
}

double mask_sum(const float* mask, int64_t M) {
  if (!mask) return static_cast<double>(M);
  double s = 0.0;
  for (int64_t i = 0; i < M; i++) s += mask[i];
  return s;
}

// Folds chunk [v0, v0 + n) of every row's logits z [M, n] into its running maximum and sum (the
// online log-sum-exp) and picks the target's logit when the target lies in the chunk.
void fold_chunk(const float* z, int64_t M, int64_t n, int64_t v0, const int32_t* targets, float* mx, float* sum,
                float* zt) {
  parallel_ranges(M, grain_for(M, 4 * n), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
      const float* zi = z + i * n;
      const float m = std::max(mx[i], row_max(zi, n));
      // The sum so far, rescaled to the new maximum (nothing yet before the first chunk).
      const float before = v0 == 0 ? 0.0f : sum[i] * simd::exp1(mx[i] - m);
      sum[i] = before + sum_exp(zi, n, m);
      mx[i] = m;
      // A masked-out row's target may be a placeholder outside the vocabulary: never read then.
      const int64_t t = int64_t(targets[i]) - v0;
      if (t >= 0 && t < n) zt[i] = zi[t];
    }
  });
}

// lse and the loss from the rows' maxima, sums and target logits, as cross_entropy.cpp sums the
// loss: each row's term in double, added in row order.
void finish_loss(float* loss, float* lse, const float* mx, const float* sum, const float* zt, const float* mask,
                 int64_t M) {
  double total = 0.0;
  for (int64_t i = 0; i < M; i++) {
    const float l = mx[i] + std::log(sum[i]);
    if (lse) lse[i] = l;
    const float w = mask ? mask[i] : 1.0f;
    if (w != 0.0f) total += static_cast<double>(w) * (static_cast<double>(l) - zt[i]);
  }
  const double count = mask_sum(mask, M);
  if (loss) *loss = count != 0.0 ? static_cast<float>(total / count) : 0.0f;
}

// Chunk [v0, v0 + n) of the logits z [M, n] -> dz = (softmax - onehot) * mask_i / count in place
// (cross_entropy.cpp's backward on these columns), softmax = exp(z - lse).
void to_dlogits(float* z, int64_t M, int64_t n, int64_t v0, const int32_t* targets, const float* lse, const float* mask,
                double count) {
  parallel_ranges(M, grain_for(M, 4 * n), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
      float* d = z + i * n;
      const float w = mask ? mask[i] : 1.0f;
      const float scale = count != 0.0 ? static_cast<float>(w / count) : 0.0f;
      if (scale == 0.0f) {  // masked-out row (or no row counts): no gradient
        std::fill(d, d + n, 0.0f);
        continue;
      }
      const float l = lse[i];
      const int64_t t = int64_t(targets[i]) - v0;
      const float zt = t >= 0 && t < n ? d[t] : 0.0f;
      int64_t v = 0;
      for (; v + kW <= n; v += kW) simd::store(d + v, simd::exp(simd::load(d + v) - l) * scale);
      for (; v < n; v++) d[v] = simd::exp1(d[v] - l) * scale;
      // The one-hot term: softmax - 1 at the target, times the row's weight.
      if (t >= 0 && t < n) d[t] = (simd::exp1(zt - l) - 1.0f) * scale;
    }
  });
}

}  // namespace

int64_t cross_entropy_tied_chunk(int64_t M, int64_t V) {
  const int64_t vc = kChunkFloats / std::max<int64_t>(M, 1) / kChunkStep * kChunkStep;
  return std::max<int64_t>(1, std::min(V, std::max(vc, kChunkStep)));
}

void cross_entropy_tied_forward(float* loss, float* lse, const float* x, const float* W, const int32_t* targets,
                                const float* mask, int64_t M, int64_t V, int64_t C, int64_t chunk) {
  if (M == 0) {
    if (loss) *loss = 0.0f;
    return;
  }
  const int64_t vc = chunk > 0 ? std::min(chunk, V) : cross_entropy_tied_chunk(M, V);
  float* z = gemm::scratch(t_logits, size_t(M * vc));
  std::vector<float> mx(size_t(M), -INFINITY), sum(size_t(M), 0.0f), zt(size_t(M), 0.0f);
  for (int64_t v0 = 0; v0 < V; v0 += vc) {
    const int64_t n = std::min(vc, V - v0);
    linear_forward(z, x, W + v0 * C, nullptr, M, n, C);
    fold_chunk(z, M, n, v0, targets, mx.data(), sum.data(), zt.data());
  }
  finish_loss(loss, lse, mx.data(), sum.data(), zt.data(), mask, M);
}

void cross_entropy_tied_backward(float* dx, bool acc_dx, float* dW, bool acc_dW, const float* x, const float* W,
                                 const int32_t* targets, const float* lse, const float* mask, int64_t M, int64_t V,
                                 int64_t C, int64_t chunk) {
  if (!dx && !dW) return;
  if (M == 0) {  // no rows: a zero gradient
    if (dW && !acc_dW) std::fill(dW, dW + V * C, 0.0f);
    return;
  }
  const int64_t vc = chunk > 0 ? std::min(chunk, V) : cross_entropy_tied_chunk(M, V);
  float* z = gemm::scratch(t_logits, size_t(M * vc));
  const double count = mask_sum(mask, M);
  for (int64_t v0 = 0; v0 < V; v0 += vc) {
    const int64_t n = std::min(vc, V - v0);
    linear_forward(z, x, W + v0 * C, nullptr, M, n, C);
    to_dlogits(z, M, n, v0, targets, lse, mask, count);
    // dx (+)= dz_c W_c over every chunk; dW's rows of this chunk = dz_c^T x.
    linear_backward(dx, acc_dx || v0 > 0, dW ? dW + v0 * C : nullptr, acc_dW, nullptr, false, z, x, W + v0 * C, M, n,
                    C);
  }
}

void cross_entropy_tied_forward_backward(float* loss, float* lse, float* dx, bool acc_dx, float* dW, bool acc_dW,
                                         const float* x, const float* W, const int32_t* targets, const float* mask,
                                         int64_t M, int64_t V, int64_t C) {
  const int64_t vc = cross_entropy_tied_chunk(M, V);
  std::vector<float> own_lse;
  if (!lse) {
    own_lse.resize(size_t(M));
    lse = own_lse.data();
  }
  if (vc < V || M == 0) {
    cross_entropy_tied_forward(loss, lse, x, W, targets, mask, M, V, C);
    cross_entropy_tied_backward(dx, acc_dx, dW, acc_dW, x, W, targets, lse, mask, M, V, C);
    return;
  }
  // One chunk holds every logit: computed once, for the loss and then, in place, its gradient.
  float* z = gemm::scratch(t_logits, size_t(M * V));
  std::vector<float> mx(size_t(M), -INFINITY), sum(size_t(M), 0.0f), zt(size_t(M), 0.0f);
  linear_forward(z, x, W, nullptr, M, V, C);
  fold_chunk(z, M, V, 0, targets, mx.data(), sum.data(), zt.data());
  finish_loss(loss, lse, mx.data(), sum.data(), zt.data(), mask, M);
  if (!dx && !dW) return;
  to_dlogits(z, M, V, 0, targets, lse, mask, mask_sum(mask, M));
  linear_backward(dx, acc_dx, dW, acc_dW, nullptr, false, z, x, W, M, V, C);
}

}  // namespace ptl::cpu
