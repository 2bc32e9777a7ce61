// Causal multi-head self-attention, FlashAttention style: no T x T matrix is ever stored.
//
// Head h of a row of q, k, v, y is the column slice [h*hs, (h+1)*hs), hs = C / H. For a query
// row i (one head) and the keys j <= i:
//   s_j = q_i . k_j / sqrt(hs),   p_j = exp(s_j - lse_i),   lse_i = log sum_j exp s_j,
//   y_i = sum_j p_j v_j.
// The forward keeps only lse_i (one float per row and head); the backward recomputes p_j from
// it, which costs a second q . k product but saves the B*H*T*T probabilities.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/backends/cpu/kernels.h"

namespace ptl::cpu {

namespace {

// Dot product with 8 independent partial sums. A plain `s += a[c] * b[c]` loop is one long
// dependency chain that the compiler may not split (that would reorder the float additions),
// so it runs one add per several cycles; 8 lanes give it a loop it can vectorise, and the
// summation order is fixed by the source, not by the compiler or the vector width.
float dot(const float* a, const float* b, int64_t n) {
    constexpr int64_t L = 8;
    float part[L] = {};
    int64_t c = 0;
    for (; c + L <= n; c += L)
        for (int64_t l = 0; l < L; l++) part[l] += a[c + l] * b[c + l];
    for (; c < n; c++) part[c % L] += a[c] * b[c];
    float s = 0.0f;
    for (int64_t l = 0; l < L; l++) s += part[l];
    return s;
}

float head_scale(int64_t hs) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs))); }

// One query row of one head against n key/value rows (consecutive rows ld floats apart):
// writes y = softmax(scale * q . k_j) weighted sum of v_j to y[0..hs) and returns the lse.
// Online softmax: keep the running max mx, sum = sum_j exp(s_j - mx) and
// acc = sum_j exp(s_j - mx) v_j; when a larger score arrives, rescale both by exp(old - new)
// so they stay relative to the current max. Every exponent is <= 0, so nothing overflows.
// acc is caller-provided scratch of hs floats.
float attend_row(float* y, const float* q, const float* k, const float* v, int64_t ld, int64_t n, int64_t hs,
                 float scale, float* acc) {
    float mx = -std::numeric_limits<float>::infinity();
    float sum = 0.0f;
    std::fill(acc, acc + hs, 0.0f);
    for (int64_t j = 0; j < n; j++) {
        const float s = dot(q, k + j * ld, hs) * scale;
        if (s > mx) {
            const float corr = std::exp(mx - s);  // exp(-inf) = 0 on the first key
            sum *= corr;
            for (int64_t c = 0; c < hs; c++) acc[c] *= corr;
            mx = s;
        }
        const float p = std::exp(s - mx);
        sum += p;
        const float* vj = v + j * ld;
        for (int64_t c = 0; c < hs; c++) acc[c] += p * vj[c];
    }
    const float inv = 1.0f / sum;  // sum >= 1: the max term contributes exp(0)
    for (int64_t c = 0; c < hs; c++) y[c] = acc[c] * inv;
    return mx + std::log(sum);
}

}  // namespace

void attention_forward(float* y, float* lse, const float* q, const float* k, const float* v, int64_t B,
                       int64_t T, int64_t C, int64_t H) {
    const int64_t hs = C / H;
    const float scale = head_scale(hs);
    std::vector<float> acc(static_cast<size_t>(hs));
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < H; h++) {
            const int64_t col = b * T * C + h * hs;  // row 0 of this sequence, this head
            for (int64_t t = 0; t < T; t++) {
                // Causal: query t sees keys 0..t.
                const float l = attend_row(y + col + t * C, q + col + t * C, k + col, v + col, C, t + 1, hs, scale,
                                           acc.data());
                if (lse) lse[(b * H + h) * T + t] = l;
            }
        }
    }
}

void attention_backward(float* dq, bool acc_dq, float* dk, bool acc_dk, float* dv, bool acc_dv, const float* dy,
                        const float* q, const float* k, const float* v, const float* y, const float* lse,
                        int64_t B, int64_t T, int64_t C, int64_t H) {
    // For one query row i with p_j = softmax_j(s), y_i = sum_j p_j v_j:
    //   dv_j += p_j dy_i
    //   dp_j  = dy_i . v_j
    //   ds_j  = p_j (dp_j - D_i),  D_i = sum_j p_j dp_j = dy_i . y_i   (softmax backward)
    //   dq_i += scale ds_j k_j,    dk_j += scale ds_j q_i             (s_j = scale q_i . k_j)
    // D_i is computed from y instead of summing over j first, so one pass over j suffices.
    const int64_t n = B * T * C;
    if (dq && !acc_dq) std::fill(dq, dq + n, 0.0f);
    if (dk && !acc_dk) std::fill(dk, dk + n, 0.0f);
    if (dv && !acc_dv) std::fill(dv, dv + n, 0.0f);
    if (!dq && !dk && !dv) return;

    const int64_t hs = C / H;
    const float scale = head_scale(hs);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < H; h++) {
            const int64_t col = b * T * C + h * hs;
            for (int64_t i = 0; i < T; i++) {
                const int64_t ri = col + i * C;  // query row i, this head
                const float* qi = q + ri;
                const float* dyi = dy + ri;
                const float D = dot(dyi, y + ri, hs);
                const float l = lse[(b * H + h) * T + i];
                for (int64_t j = 0; j <= i; j++) {
                    const int64_t rj = col + j * C;
                    const float p = std::exp(dot(qi, k + rj, hs) * scale - l);
                    if (dv)
                        for (int64_t c = 0; c < hs; c++) dv[rj + c] += p * dyi[c];
                    if (!dq && !dk) continue;
                    const float ds = p * (dot(dyi, v + rj, hs) - D) * scale;
                    if (dq)
                        for (int64_t c = 0; c < hs; c++) dq[ri + c] += ds * k[rj + c];
                    if (dk)
                        for (int64_t c = 0; c < hs; c++) dk[rj + c] += ds * qi[c];
                }
            }
        }
    }
}

void kv_cache_write(float* k_cache, float* v_cache, const float* k, const float* v, int64_t n, int64_t C,
                    int64_t pos0) {
    std::copy(k, k + n * C, k_cache + pos0 * C);
    std::copy(v, v + n * C, v_cache + pos0 * C);
}

void attention_cached(float* y, const float* q, const float* k_cache, const float* v_cache, int64_t n,
                      int64_t C, int64_t H, int64_t pos0) {
    // The same attend_row as the training forward, over the cache instead of the batch, so the
    // generated tokens see exactly the numbers a full forward pass would compute.
    const int64_t hs = C / H;
    const float scale = head_scale(hs);
    std::vector<float> acc(static_cast<size_t>(hs));
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < H; h++)
            attend_row(y + i * C + h * hs, q + i * C + h * hs, k_cache + h * hs, v_cache + h * hs, C, pos0 + i + 1,
                       hs, scale, acc.data());
}

}  // namespace ptl::cpu
