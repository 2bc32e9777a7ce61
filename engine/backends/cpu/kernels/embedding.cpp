// Token + position embedding: x[b, t, :] = tok_emb[tokens[b, t], :] + pos_emb[pos0 + t, :].
#include <algorithm>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"

namespace ptl::cpu {

void embedding_forward(float* x, const int32_t* tokens, const float* tok_emb, const float* pos_emb, int64_t B,
                       int64_t T, int64_t C, int64_t pos0) {
  parallel_ranges(B * T, grain_for(B * T, C), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const int64_t t = r % T;
      float* out = x + r * C;
      const float* te = tok_emb + static_cast<int64_t>(tokens[r]) * C;
      const float* pe = pos_emb + (pos0 + t) * C;
      for (int64_t c = 0; c < C; c++) out[c] = te[c] + pe[c];
    }
  });
}

void embedding_backward(float* dtok_emb, bool acc_tok, float* dpos_emb, bool acc_pos, const float* dx,
                        const int32_t* tokens, int64_t B, int64_t T, int64_t C, int64_t V, int64_t ctx, int64_t pos0) {
  // The forward is a lookup, so the backward is a scatter-add: every (b, t) sends dx[b, t] to
  // the row it read from. A token that occurs several times collects several gradients, and
  // position pos0 + t collects one from every sequence of the batch.
  //
  // Threads split the *outputs*, never the tokens: dtok_emb by blocks of channels (each task
  // walks all tokens in order but adds only its own columns), dpos_emb by positions (each
  // task sums its positions over the batch in order). No two threads touch the same float,
  // and every sum runs in token order, so the result does not depend on the thread count.
  constexpr int64_t kColBlock = 32;
  if (dtok_emb) {
    parallel_ranges(C, kColBlock, [&](int64_t c0, int64_t c1) {
      if (!acc_tok)
        for (int64_t v = 0; v < V; v++) std::fill(dtok_emb + v * C + c0, dtok_emb + v * C + c1, 0.0f);
      for (int64_t i = 0; i < B * T; i++) {
        float* d = dtok_emb + static_cast<int64_t>(tokens[i]) * C;
        const float* g = dx + i * C;
        for (int64_t c = c0; c < c1; c++) d[c] += g[c];
      }
    });
  }
  if (dpos_emb) {
    if (!acc_pos) std::fill(dpos_emb, dpos_emb + ctx * C, 0.0f);
    parallel_ranges(T, grain_for(T, B * C), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; t++) {
        float* d = dpos_emb + (pos0 + t) * C;
        for (int64_t b = 0; b < B; b++) {
          const float* g = dx + (b * T + t) * C;
          for (int64_t c = 0; c < C; c++) d[c] += g[c];
        }
      }
    });
  }
}

}  // namespace ptl::cpu
