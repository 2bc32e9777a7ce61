// Token + position embedding: x[b, t, :] = tok_emb[tokens[b, t], :] + pos_emb[pos0 + t, :].
#include <algorithm>

#include "engine/backends/cpu/kernels.h"

namespace ptl::cpu {

void embedding_forward(float* x, const int32_t* tokens, const float* tok_emb, const float* pos_emb,
                       int64_t B, int64_t T, int64_t C, int64_t pos0) {
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < T; t++) {
            float* out = x + (b * T + t) * C;
            const float* te = tok_emb + static_cast<int64_t>(tokens[b * T + t]) * C;
            const float* pe = pos_emb + (pos0 + t) * C;
            for (int64_t c = 0; c < C; c++) out[c] = te[c] + pe[c];
        }
    }
}

void embedding_backward(float* dtok_emb, bool acc_tok, float* dpos_emb, bool acc_pos, const float* dx,
                        const int32_t* tokens, int64_t B, int64_t T, int64_t C, int64_t V, int64_t ctx,
                        int64_t pos0) {
    // The forward is a lookup, so the backward is a scatter-add: every (b, t) sends dx[b, t] to
    // the row it read from. A token that occurs several times collects several gradients, and
    // position pos0 + t collects one from every sequence of the batch. The loops run in a fixed
    // order, so the sums are the same on every run.
    if (dtok_emb) {
        if (!acc_tok) std::fill(dtok_emb, dtok_emb + V * C, 0.0f);
        for (int64_t i = 0; i < B * T; i++) {
            float* d = dtok_emb + static_cast<int64_t>(tokens[i]) * C;
            const float* g = dx + i * C;
            for (int64_t c = 0; c < C; c++) d[c] += g[c];
        }
    }
    if (dpos_emb) {
        if (!acc_pos) std::fill(dpos_emb, dpos_emb + ctx * C, 0.0f);
        for (int64_t b = 0; b < B; b++) {
            for (int64_t t = 0; t < T; t++) {
                float* d = dpos_emb + (pos0 + t) * C;
                const float* g = dx + (b * T + t) * C;
                for (int64_t c = 0; c < C; c++) d[c] += g[c];
            }
        }
    }
}

}  // namespace ptl::cpu
