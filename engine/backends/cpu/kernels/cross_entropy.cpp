// Cross-entropy of the next-token logits, averaged over the (masked) rows:
//   loss = sum_i mask_i (lse_i - logits[i, targets_i]) / sum_i mask_i,  lse_i = log sum_v exp logits[i, v].
// mask null means every row counts with weight 1; rows with mask 0 are skipped entirely (their
// target is never read, so it may be a placeholder).
//
// Rows are independent and threaded. The loss is a sum over rows: each row's term is stored,
// and the terms are added serially in row order at the end, so the loss is the same bitwise
// whatever the thread count.
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

// log sum_v exp z[v], computed as max + log sum exp(z - max): every exponent is <= 0, so
// nothing overflows, and the largest term is exactly 1, so the sum cannot underflow to 0.
// Vectorised over v, lanes (then the tail) added in a fixed order.
float log_sum_exp(const float* z, int64_t V) {
  int64_t v = 0;
  float mx = z[0];
  if (V >= kW) {
    vf m = simd::load(z);
    for (v = kW; v + kW <= V; v += kW) m = simd::vmax(m, simd::load(z + v));
    mx = simd::hmax(m);
  }
  for (int64_t t = v; t < V; t++) mx = std::max(mx, z[t]);
  vf sum = vf{};
  for (v = 0; v + kW <= V; v += kW) sum += simd::exp(simd::load(z + v) - mx);
  float s = simd::hsum(sum);
  for (; v < V; v++) s += simd::exp1(z[v] - mx);
  return mx + std::log(s);
}

double mask_sum(const float* mask, int64_t M) {
  if (!mask) return static_cast<double>(M);
  double s = 0.0;
  for (int64_t i = 0; i < M; i++) s += mask[i];
  return s;
}

}  // namespace

void cross_entropy_forward(float* loss, float* lse, const float* logits, const int32_t* targets, const float* mask,
                           int64_t M, int64_t V) {
  std::vector<double> term(static_cast<size_t>(M), 0.0);
  parallel_ranges(M, grain_for(M, 4 * V), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
      const float* z = logits + i * V;
      const float l = log_sum_exp(z, V);
      if (lse) lse[i] = l;
      const float w = mask ? mask[i] : 1.0f;
      if (w != 0.0f) term[size_t(i)] = static_cast<double>(w) * (static_cast<double>(l) - z[targets[i]]);
    }
  });
  double total = 0.0;
  for (int64_t i = 0; i < M; i++) total += term[size_t(i)];  // row order, on one thread
  const double count = mask_sum(mask, M);
  if (loss) *loss = count != 0.0 ? static_cast<float>(total / count) : 0.0f;
}

void cross_entropy_backward(float* dlogits, bool acc, const float* logits, const int32_t* targets, const float* lse,
                            const float* mask, int64_t M, int64_t V) {
  // d(lse_i - z[i, t_i]) / dz[i, v] = softmax(z_i)[v] - [v == t_i], and softmax = exp(z - lse),
  // reusing the forward's log-sum-exp. Each row is scaled by its weight in the average.
  const double count = mask_sum(mask, M);
  parallel_ranges(M, grain_for(M, 4 * V), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
      const float* z = logits + i * V;
      float* d = dlogits + i * V;
      const float w = mask ? mask[i] : 1.0f;
      const float scale = count != 0.0 ? static_cast<float>(w / count) : 0.0f;
      if (scale == 0.0f) {  // masked-out row (or no row counts): zero gradient
        if (!acc) std::fill(d, d + V, 0.0f);
        continue;
      }
      const float l = lse ? lse[i] : log_sum_exp(z, V);
      const int64_t t = targets[i];
      const float prior_t = acc ? d[t] : 0.0f;  // the target's entry is redone below
      int64_t v = 0;
      for (; v + kW <= V; v += kW) {
        vf g = simd::exp(simd::load(z + v) - l) * scale;
        if (acc) g += simd::load(d + v);
        simd::store(d + v, g);
      }
      for (; v < V; v++) {
        const float g = simd::exp1(z[v] - l) * scale;
        d[v] = acc ? d[v] + g : g;
      }
      // The one-hot term: softmax - 1 at the target, times the row's weight.
      const float p = simd::exp1(z[t] - l);
      d[t] = prior_t + (p - 1.0f) * scale;
    }
  });
}

}  // namespace ptl::cpu
