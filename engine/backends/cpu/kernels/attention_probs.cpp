// The attention probabilities themselves, for inspection ("watch the model think"): the
// B x H x T x T matrix that the attention kernel never stores.
//
// probs[b, h, i, j] = softmax_j(q_i . k_j / sqrt(hs)) over the keys j <= i, and exactly 0 for
// j > i (causal). q and k are the very tensors the attention op reads, so these are the weights
// that op applied to v: probs @ v equals its output y up to rounding (tests/test_inspect.cpp).
//
// Written plainly (no packing, no SIMD): it runs once per inspection, not per training step,
// and it is the reference its WGSL twin (web/webgpu) is checked against. One task per
// (sequence, head); each task writes its own T x T block, every element in a fixed order, so
// the result is the same for any thread count.
#include <algorithm>
#include <cmath>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"

namespace ptl::cpu {

void attention_probs_forward(float* probs, const float* q, const float* k, int64_t B, int64_t T, int64_t C, int64_t H) {
  const int64_t hs = C / H;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)));
  parallel_for(B * H, [&](int64_t task) {
    const int64_t b = task / H, h = task % H;
    const float* qb = q + b * T * C + h * hs;  // row 0 of this sequence, this head
    const float* kb = k + b * T * C + h * hs;
    float* out = probs + task * T * T;  // [b, h] block: T query rows of T keys
    for (int64_t i = 0; i < T; ++i) {
      float* row = out + i * T;
      const float* qi = qb + i * C;
      // Scores of the visible keys, and their maximum (subtracted before exp for range).
      float mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        const float* kj = kb + j * C;
        float s = 0.0f;
        for (int64_t c = 0; c < hs; ++c) s += qi[c] * kj[c];
        row[j] = s * scale;
        mx = std::max(mx, row[j]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j <= i; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      const float inv = 1.0f / sum;  // sum >= 1: the maximum's term is exp(0)
      for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
      for (int64_t j = i + 1; j < T; ++j) row[j] = 0.0f;  // future positions: exactly zero
    }
  });
}

}  // namespace ptl::cpu
