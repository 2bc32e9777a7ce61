// Cross-entropy of the next-token logits, averaged over the (masked) rows:
//   loss = sum_i mask_i (lse_i - logits[i, targets_i]) / sum_i mask_i,  lse_i = log sum_v exp logits[i, v].
// mask null means every row counts with weight 1; rows with mask 0 are skipped entirely (their
// target is never read, so it may be a placeholder).
#include <algorithm>
#include <cmath>

#include "engine/backends/cpu/kernels.h"

namespace ptl::cpu {

namespace {

// log sum_v exp z[v], computed as max + log sum exp(z - max): every exponent is <= 0, so
// nothing overflows, and the largest term is exactly 1, so the sum cannot underflow to 0.
float log_sum_exp(const float* z, int64_t V) {
    float mx = z[0];
    for (int64_t v = 1; v < V; v++) mx = std::max(mx, z[v]);
    double sum = 0.0;
    for (int64_t v = 0; v < V; v++) sum += std::exp(z[v] - mx);
    return mx + static_cast<float>(std::log(sum));
}

double mask_sum(const float* mask, int64_t M) {
    if (!mask) return static_cast<double>(M);
    double s = 0.0;
    for (int64_t i = 0; i < M; i++) s += mask[i];
    return s;
}

}  // namespace

void cross_entropy_forward(float* loss, float* lse, const float* logits, const int32_t* targets,
                           const float* mask, int64_t M, int64_t V) {
    double total = 0.0;
    for (int64_t i = 0; i < M; i++) {
        const float* z = logits + i * V;
        const float l = log_sum_exp(z, V);
        if (lse) lse[i] = l;
        const float w = mask ? mask[i] : 1.0f;
        if (w != 0.0f) total += static_cast<double>(w) * (static_cast<double>(l) - z[targets[i]]);
    }
    const double count = mask_sum(mask, M);
    if (loss) *loss = count != 0.0 ? static_cast<float>(total / count) : 0.0f;
}

void cross_entropy_backward(float* dlogits, bool acc, const float* logits, const int32_t* targets,
                            const float* lse, const float* mask, int64_t M, int64_t V) {
    // d(lse_i - z[i, t_i]) / dz[i, v] = softmax(z_i)[v] - [v == t_i], and softmax = exp(z - lse),
    // reusing the forward's log-sum-exp. Each row is scaled by its weight in the average.
    const double count = mask_sum(mask, M);
    for (int64_t i = 0; i < M; i++) {
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
        for (int64_t v = 0; v < V; v++) {
            const float p = std::exp(z[v] - l);
            const float g = (v == t ? p - 1.0f : p) * scale;
            d[v] = acc ? d[v] + g : g;
        }
    }
}

}  // namespace ptl::cpu
