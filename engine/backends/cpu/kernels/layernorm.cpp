// LayerNorm over the last dimension C: y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps),
// with the biased variance (divide by C) as PyTorch uses.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/backends/cpu/kernels.h"

namespace ptl::cpu {

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b,
                       int64_t N, int64_t C, float eps) {
    for (int64_t i = 0; i < N; i++) {
        const float* xi = x + i * C;
        // Two passes in double: the mean first, then the squared deviations from it. The
        // one-pass E[x^2] - E[x]^2 cancels catastrophically when |mean| >> std.
        double sum = 0.0;
        for (int64_t c = 0; c < C; c++) sum += xi[c];
        const double mu = sum / static_cast<double>(C);
        double sq = 0.0;
        for (int64_t c = 0; c < C; c++) {
            const double d = xi[c] - mu;
            sq += d * d;
        }
        const double var = sq / static_cast<double>(C);
        const float m = static_cast<float>(mu);
        const float s = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
        // Normalise with the rounded float statistics, the same values the backward will see.
        float* yi = y + i * C;
        for (int64_t c = 0; c < C; c++) yi[c] = (xi[c] - m) * s * w[c] + b[c];
        if (mean) mean[i] = m;
        if (rstd) rstd[i] = s;
    }
}

void layernorm_backward(float* dx, bool acc_dx, float* dw, bool acc_dw, float* db, bool acc_db,
                        const float* dy, const float* x, const float* w, const float* mean, const float* rstd,
                        int64_t N, int64_t C) {
    // With xhat = (x - mean) * rstd and g = dy * w (the gradient reaching xhat):
    //   db = sum over rows of dy,  dw = sum over rows of dy * xhat,
    //   dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)).
    // The two row means come from differentiating through mean and rstd, which depend on every
    // x of the row: the first removes the component along (1, ..., 1), the second the component
    // along xhat.
    // dw and db are sums over all N rows: accumulate them in double, add to the output at the end.
    std::vector<double> dw_sum(dw ? static_cast<size_t>(C) : 0, 0.0);
    std::vector<double> db_sum(db ? static_cast<size_t>(C) : 0, 0.0);
    for (int64_t i = 0; i < N; i++) {
        const float* xi = x + i * C;
        const float* dyi = dy + i * C;
        const float m = mean[i];
        const float s = rstd[i];
        if (dw || db) {
            for (int64_t c = 0; c < C; c++) {
                const float xhat = (xi[c] - m) * s;
                if (dw) dw_sum[c] += static_cast<double>(dyi[c]) * xhat;
                if (db) db_sum[c] += dyi[c];
            }
        }
        if (dx) {
            double g_sum = 0.0, gx_sum = 0.0;
            for (int64_t c = 0; c < C; c++) {
                const float xhat = (xi[c] - m) * s;
                const float g = dyi[c] * w[c];
                g_sum += g;
                gx_sum += static_cast<double>(g) * xhat;
            }
            const float g_mean = static_cast<float>(g_sum / static_cast<double>(C));
            const float gx_mean = static_cast<float>(gx_sum / static_cast<double>(C));
            float* dxi = dx + i * C;
            for (int64_t c = 0; c < C; c++) {
                const float xhat = (xi[c] - m) * s;
                const float v = s * (dyi[c] * w[c] - g_mean - xhat * gx_mean);
                dxi[c] = acc_dx ? dxi[c] + v : v;
            }
        }
    }
    if (dw)
        for (int64_t c = 0; c < C; c++) dw[c] = (acc_dw ? dw[c] : 0.0f) + static_cast<float>(dw_sum[c]);
    if (db)
        for (int64_t c = 0; c < C; c++) db[c] = (acc_db ? db[c] : 0.0f) + static_cast<float>(db_sum[c]);
}

}  // namespace ptl::cpu
