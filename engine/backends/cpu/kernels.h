#pragma once
// CPU kernels: one file per op under kernels/, each op's forward and backward side by side.
//
// Conventions shared by every kernel (and mirrored by the WGSL kernels of the same names):
// - Tensors are dense, row-major fp32 (token ids int32). Sizes are int64_t element counts.
// - Linear weights are stored [out_features, in_features] (PyTorch layout).
// - A null output pointer means "not needed" and the kernel skips that work.
// - `acc` flags: when true the kernel adds into the output (+=), otherwise it overwrites it.
//   Gradients of tensors used twice in the forward pass are accumulated this way.
// - Threads: every kernel splits its work over the pool of thread_pool.h (set_num_threads),
//   so that each output element is computed by one thread in an order fixed by the source, and
//   reductions (losses, norms, weight-gradient sums over rows) use fixed-size chunks whose
//   partials are added in order. The outputs are bitwise the same for any thread count.
// - Causal attention works on q, k, v of shape [B, T, C] with H heads of size C / H; it keeps
//   the log-sum-exp of each query row (lse [B, H, T]) so the backward can recompute the
//   probabilities instead of storing a T x T matrix.
#include <cstddef>
#include <cstdint>

#include "engine/dropout.h"

namespace ptl::cpu {

// The width of the kernels' vectors in bits (512 with AVX-512, 256 with AVX2, 128 otherwise),
// as the engine was compiled: the flags of the code that calls this may differ.
int vector_bits();

// embedding.cpp: x[b,t,:] = tok_emb[tokens[b,t], :] + pos_emb[pos0 + t, :]
void embedding_forward(float* x, const int32_t* tokens, const float* tok_emb, const float* pos_emb, int64_t B,
                       int64_t T, int64_t C, int64_t pos0);
void embedding_backward(float* dtok_emb, bool acc_tok, float* dpos_emb, bool acc_pos, const float* dx,
                        const int32_t* tokens, int64_t B, int64_t T, int64_t C, int64_t V, int64_t ctx, int64_t pos0);

// layernorm.cpp: per row of C: y = (x - mean) * rstd * w + b, eps inside the sqrt.
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t N,
                       int64_t C, float eps);
void layernorm_backward(float* dx, bool acc_dx, float* dw, bool acc_dw, float* db, bool acc_db, const float* dy,
                        const float* x, const float* w, const float* mean, const float* rstd, int64_t N, int64_t C);

// linear.cpp: y[M,N] = x[M,K] W[N,K]^T + b[N] (b may be null).
void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t M, int64_t N, int64_t K);
// The same with W given as panels packed once (linear_pack_weight into linear_packed_floats(N, K)
// floats), for a weight used by many products while it does not change: bitwise the same y.
size_t linear_packed_floats(int64_t N, int64_t K);
void linear_pack_weight(float* packed, const float* W, int64_t N, int64_t K);
void linear_forward_packed(float* y, const float* x, const float* W_packed, const float* b, int64_t M, int64_t N,
                           int64_t K);
// dx[M,K] (+)= dy W ; dW[N,K] (+)= dy^T x ; db[N] (+)= column sums of dy. Any output may be null.
void linear_backward(float* dx, bool acc_dx, float* dW, bool acc_dW, float* db, bool acc_db, const float* dy,
                     const float* x, const float* W, int64_t M, int64_t N, int64_t K);

// attention.cpp: causal multi-head attention, scores scaled by 1/sqrt(C/H), softmax in fp32.
// With a dropout mask on, probability (b, h, i, j) is kept (times its scale) or zeroed by element
// ((b*H + h)*T + i)*T + j of the mask; lse stays that of the undropped softmax, and the backward
// regenerates the same mask.
void attention_forward(float* y, float* lse, const float* q, const float* k, const float* v, int64_t B, int64_t T,
                       int64_t C, int64_t H, const dropout::Mask& mask = {});
void attention_backward(float* dq, bool acc_dq, float* dk, bool acc_dk, float* dv, bool acc_dv, const float* dy,
                        const float* q, const float* k, const float* v, const float* y, const float* lse, int64_t B,
                        int64_t T, int64_t C, int64_t H, const dropout::Mask& mask = {});
// Generation with a KV cache of `ctx` rows: write n new rows at pos0, then attend query row i
// (position pos0 + i) to cache rows 0 .. pos0 + i.
void kv_cache_write(float* k_cache, float* v_cache, const float* k, const float* v, int64_t n, int64_t C, int64_t pos0);
void attention_cached(float* y, const float* q, const float* k_cache, const float* v_cache, int64_t n, int64_t C,
                      int64_t H, int64_t pos0);
// attention_probs.cpp: the probabilities attention applies, stored (for inspection; no backward):
// probs[B, H, T, T] = softmax_j(q_i . k_j / sqrt(C/H)) for j <= i, exactly 0 for j > i.
void attention_probs_forward(float* probs, const float* q, const float* k, int64_t B, int64_t T, int64_t C, int64_t H);
// slice_rows.cpp: y[i, :] = x[first + i, :] for the n rows of C floats of y (no backward: inference only).
void slice_rows(float* y, const float* x, int64_t first, int64_t n, int64_t C);

// gelu.cpp: the exact GELU, 0.5 x (1 + erf(x / sqrt 2)), or GPT-2's tanh approximation (its
// gelu_new), 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): ModelConfig::gelu.
enum class Gelu { erf, tanh };
void gelu_forward(float* y, const float* x, int64_t n, Gelu kind = Gelu::erf);
void gelu_backward(float* dx, bool acc, const float* dy, const float* x, int64_t n, Gelu kind = Gelu::erf);

// add.cpp: y = a + alpha * b; the backward hands dy to a and alpha * dy to b.
void add_forward(float* y, const float* a, const float* b, float alpha, int64_t n);
void add_backward(float* da, bool acc_a, float* db, bool acc_b, const float* dy, float alpha, int64_t n);

// dropout.cpp: y[i] = x[i] * scale where the mask keeps element i, else 0; the backward applies
// the same mask to dy.
void dropout_forward(float* y, const float* x, int64_t n, const dropout::Mask& mask);
void dropout_backward(float* dx, bool acc, const float* dy, int64_t n, const dropout::Mask& mask);

// cross_entropy.cpp: loss = sum_i mask_i (lse_i - logits[i, targets_i]) / sum_i mask_i
// (mask null = all ones). The backward is d loss / d logits for an upstream gradient of 1:
// (softmax - onehot) * mask_i / sum(mask).
void cross_entropy_forward(float* loss, float* lse, const float* logits, const int32_t* targets, const float* mask,
                           int64_t M, int64_t V);
void cross_entropy_backward(float* dlogits, bool acc, const float* logits, const int32_t* targets, const float* lse,
                            const float* mask, int64_t M, int64_t V);

// cross_entropy_tied.cpp: the tied output projection and the cross-entropy in one op, without a
// [M, V] logits buffer: z = x[M,C] W[V,C]^T is computed chunk by chunk of `chunk` vocabulary rows
// (0 = cross_entropy_tied_chunk(M, V)), its log-sum-exp accumulated online per row; loss and lse
// as cross_entropy_forward on z. The backward recomputes each chunk's logits:
// dx (+)= dz W, dW (+)= dz^T x with dz = (softmax(z) - onehot) * mask_i / sum(mask). lse is the
// forward's. Either gradient may be null.
int64_t cross_entropy_tied_chunk(int64_t M, int64_t V);  // vocabulary rows per chunk, a multiple of 64 (or V)
void cross_entropy_tied_forward(float* loss, float* lse, const float* x, const float* W, const int32_t* targets,
                                const float* mask, int64_t M, int64_t V, int64_t C, int64_t chunk = 0);
void cross_entropy_tied_backward(float* dx, bool acc_dx, float* dW, bool acc_dW, const float* x, const float* W,
                                 const int32_t* targets, const float* lse, const float* mask, int64_t M, int64_t V,
                                 int64_t C, int64_t chunk = 0);
// The forward then the backward (a training program's loss: its two ops back to back), bitwise
// what the two give; where one chunk holds all of V, the logits are computed once for both.
void cross_entropy_tied_forward_backward(float* loss, float* lse, float* dx, bool acc_dx, float* dW, bool acc_dW,
                                         const float* x, const float* W, const int32_t* targets, const float* mask,
                                         int64_t M, int64_t V, int64_t C);

// adamw.cpp
// Sum of squares in double (the global gradient norm is the sqrt of the sum over tensors).
double sum_squares(const float* x, int64_t n);
// The same over several tensors at once (the gradient norm), threaded; the result does not
// depend on the thread count.
double sum_squares_many(const float* const* xs, const int64_t* ns, int64_t count);
// One AdamW step (see docs/model.md); the gradient is multiplied by grad_scale first
// (the clipping coefficient). t is the 1-based step count for bias correction.
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int64_t t, float grad_scale);
// The same for several tensors in one parallel pass (the executor's run of adamw ops); each
// tensor's floats are exactly those of adamw_update.
struct AdamWTensor {
  float* p;
  const float* g;
  float* m;
  float* v;
  int64_t n;
  float lr, beta1, beta2, eps, weight_decay;
  int64_t t;
  float grad_scale;
};
void adamw_update_many(const AdamWTensor* tensors, int64_t count);

}  // namespace ptl::cpu
