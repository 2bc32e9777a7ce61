// Tests of the CPU kernels (engine/backends/cpu/kernels.h).
//
// Every backward is checked against central finite differences of its forward: for a random
// upstream gradient R, the scalar L = sum(out * R) (summed in double) has dL/dout = R, so the
// backward called with dy = R must return dL/dinput, and
//   dL/dx_i ~ (L(x_i + h) - L(x_i - h)) / 2h.
// The shapes are small and ragged (C = 7, T = 5, sizes below 8, and sizes just above the
// linear kernel's register tiles) so that index mistakes at the edges show up.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/backends/cpu/fma_exact.h"
#include "engine/backends/cpu/gemm.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/simd.h"
#include "engine/backends/cpu/thread_pool.h"

using namespace ptl::cpu;

namespace {

using Vec = std::vector<float>;

Vec randn(size_t n, uint32_t seed, float std = 1.0f, float mean = 0.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(mean, std);
  Vec v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

double weighted_sum(const Vec& out, const Vec& R) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); i++) s += static_cast<double>(out[i]) * R[i];
  return s;
}

// Finite-difference step. With fp32 forwards the rounding noise of L is about 1e-7 * |L|, which
// the division by 2h turns into ~1e-4 absolute; the truncation error is O(h^2) ~ 1e-6.
constexpr float kH = 1e-3f;

// Tolerance: |analytic - numeric| <= 1e-2 * |numeric| + 2e-3. Gradient entries here are O(0.1..1),
// so a gradient sent to the wrong element (wrong index, wrong row, missing term) is off by
// O(0.1) or more and fails, while the fp32 noise above stays well inside.
bool grad_close(double a, double n) { return std::fabs(a - n) <= 1e-2 * std::fabs(n) + 2e-3; }

// Compares analytic[i] with the central difference of `loss` in x[i], for every i (or, for
// larger tensors, `max_checks` evenly spread indices).
void check_grad(const std::string& what, Vec& x, const Vec& analytic, const std::function<double()>& loss,
                size_t max_checks = 400) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const size_t n = x.size();
  const size_t stride = n <= max_checks ? 1 : n / max_checks + 1;
  int failures = 0;
  for (size_t i = 0; i < n; i += stride) {
    const float old = x[i];
    const float xp = old + kH, xm = old - kH;
    x[i] = xp;
    const double lp = loss();
    x[i] = xm;
    const double lm = loss();
    x[i] = old;
    const double numeric = (lp - lm) / (static_cast<double>(xp) - xm);
    if (!grad_close(analytic[i], numeric) && failures++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << " vs numeric " << numeric;
  }
  EXPECT_EQ(failures, 0) << what << ": " << failures << " mismatching entries";
}

// For the acc flags: out = prior + fresh, element by element.
void expect_sum(const std::string& what, const Vec& out, const Vec& prior, const Vec& fresh) {
  ASSERT_EQ(out.size(), prior.size());
  for (size_t i = 0; i < out.size(); i++)
    ASSERT_NEAR(out[i], prior[i] + fresh[i], 1e-5f * (1.0f + std::fabs(prior[i] + fresh[i])))
        << what << "[" << i << "]";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Embedding

TEST(Embedding, ForwardLooksUpAndAdds) {
  const int64_t B = 2, T = 3, C = 5, V = 4, ctx = 7, pos0 = 2;
  const std::vector<int32_t> tokens = {3, 1, 3, 0, 0, 2};
  const Vec tok = randn(V * C, 1), pos = randn(ctx * C, 2);
  Vec x(B * T * C);
  embedding_forward(x.data(), tokens.data(), tok.data(), pos.data(), B, T, C, pos0);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t c = 0; c < C; c++)
        EXPECT_EQ(x[(b * T + t) * C + c], tok[tokens[b * T + t] * C + c] + pos[(pos0 + t) * C + c]);
}

TEST(Embedding, BackwardMatchesFiniteDifferences) {
  // Repeated tokens (3 and 0 twice), an unused token (none here is 4), pos0 > 0.
  const int64_t B = 2, T = 3, C = 5, V = 5, ctx = 7, pos0 = 2;
  const std::vector<int32_t> tokens = {3, 1, 3, 0, 0, 2};
  Vec tok = randn(V * C, 3), pos = randn(ctx * C, 4);
  const Vec R = randn(B * T * C, 5);
  auto loss = [&] {
    Vec x(B * T * C);
    embedding_forward(x.data(), tokens.data(), tok.data(), pos.data(), B, T, C, pos0);
    return weighted_sum(x, R);
  };
  Vec dtok(V * C, 123.0f), dpos(ctx * C, 123.0f);  // garbage: acc=false must overwrite all of it
  embedding_backward(dtok.data(), false, dpos.data(), false, R.data(), tokens.data(), B, T, C, V, ctx, pos0);
  check_grad("dtok_emb", tok, dtok, loss);
  check_grad("dpos_emb", pos, dpos, loss);
  for (int64_t c = 0; c < C; c++) EXPECT_EQ(dtok[4 * C + c], 0.0f);  // token 4 never occurs
  for (int64_t c = 0; c < C; c++) EXPECT_EQ(dpos[0 * C + c], 0.0f);  // positions before pos0
}

TEST(Embedding, AccFlagsAdd) {
  const int64_t B = 2, T = 3, C = 5, V = 5, ctx = 7, pos0 = 1;
  const std::vector<int32_t> tokens = {3, 1, 3, 0, 0, 2};
  const Vec dx = randn(B * T * C, 6);
  Vec gt(V * C), gp(ctx * C);
  embedding_backward(gt.data(), false, gp.data(), false, dx.data(), tokens.data(), B, T, C, V, ctx, pos0);
  const Vec pt = randn(V * C, 7), pp = randn(ctx * C, 8);
  Vec at = pt, ap = pp;
  embedding_backward(at.data(), true, ap.data(), true, dx.data(), tokens.data(), B, T, C, V, ctx, pos0);
  expect_sum("dtok_emb", at, pt, gt);
  expect_sum("dpos_emb", ap, pp, gp);
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

TEST(LayerNorm, ForwardNormalises) {
  const int64_t N = 3, C = 7;
  const Vec x = randn(N * C, 10, 3.0f, 5.0f);  // |mean| >> 0: exercises the two-pass variance
  const Vec w(C, 1.0f), b(C, 0.0f);
  Vec y(N * C), mean(N), rstd(N);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
  for (int64_t i = 0; i < N; i++) {
    double mu = 0.0, var = 0.0;
    for (int64_t c = 0; c < C; c++) mu += x[i * C + c];
    mu /= C;
    for (int64_t c = 0; c < C; c++) var += (x[i * C + c] - mu) * (x[i * C + c] - mu);
    var /= C;
    EXPECT_NEAR(mean[i], mu, 1e-6 * std::fabs(mu));
    EXPECT_NEAR(rstd[i], 1.0 / std::sqrt(var + 1e-5), 1e-6 / std::sqrt(var));
    for (int64_t c = 0; c < C; c++) EXPECT_NEAR(y[i * C + c], (x[i * C + c] - mu) / std::sqrt(var + 1e-5), 1e-5);
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  for (int64_t C : {7, 3, 16}) {
    const int64_t N = 5;
    Vec x = randn(N * C, 11, 1.5f, 0.5f), w = randn(C, 12, 0.5f, 1.0f), b = randn(C, 13);
    const Vec R = randn(N * C, 14);
    auto loss = [&] {
      Vec y(N * C), mean(N), rstd(N);
      layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
      return weighted_sum(y, R);
    };
    Vec y(N * C), mean(N), rstd(N);
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
    Vec dx(N * C, 9.0f), dw(C, 9.0f), db(C, 9.0f);
    layernorm_backward(dx.data(), false, dw.data(), false, db.data(), false, R.data(), x.data(), w.data(), mean.data(),
                       rstd.data(), N, C);
    const std::string tag = " (C=" + std::to_string(C) + ")";
    check_grad("dx" + tag, x, dx, loss);
    check_grad("dw" + tag, w, dw, loss);
    check_grad("db" + tag, b, db, loss);
  }
}

TEST(LayerNorm, AccFlagsAdd) {
  const int64_t N = 4, C = 7;
  const Vec x = randn(N * C, 15), w = randn(C, 16), b = randn(C, 17), dy = randn(N * C, 18);
  Vec y(N * C), mean(N), rstd(N);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
  Vec gx(N * C), gw(C), gb(C);
  layernorm_backward(gx.data(), false, gw.data(), false, gb.data(), false, dy.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  const Vec px = randn(N * C, 19), pw = randn(C, 20), pb = randn(C, 21);
  Vec ax = px, aw = pw, ab = pb;
  layernorm_backward(ax.data(), true, aw.data(), true, ab.data(), true, dy.data(), x.data(), w.data(), mean.data(),
                     rstd.data(), N, C);
  expect_sum("dx", ax, px, gx);
  expect_sum("dw", aw, pw, gw);
  expect_sum("db", ab, pb, gb);
}

// ---------------------------------------------------------------------------------------------
// Linear

// Shapes: tiny and ragged, and just past the register tiles (8 or 4 rows x 32 columns) so the
// tile and the leftover-row / leftover-column paths all run.
struct LinearShape {
  int64_t M, N, K;
};
const LinearShape kLinearShapes[] = {{1, 1, 1}, {5, 7, 6}, {3, 2, 9}, {9, 35, 33}, {17, 64, 40}};

TEST(Linear, ForwardMatchesNaive) {
  for (const auto [M, N, K] : kLinearShapes) {
    const Vec x = randn(M * K, 30), W = randn(N * K, 31), b = randn(N, 32);
    for (bool with_bias : {true, false}) {
      Vec y(M * N, 77.0f);
      linear_forward(y.data(), x.data(), W.data(), with_bias ? b.data() : nullptr, M, N, K);
      for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
          double s = with_bias ? b[n] : 0.0;
          for (int64_t k = 0; k < K; k++) s += static_cast<double>(x[m * K + k]) * W[n * K + k];
          ASSERT_NEAR(y[m * N + n], s, 1e-5 * (1.0 + std::fabs(s)))
              << "M=" << M << " N=" << N << " K=" << K << " m=" << m << " n=" << n;
        }
    }
  }
}

// A few rows (sampling's one token) take another plan than a batch (W packed by the task that
// uses each panel): a plan is only a choice of speed, so each row's outputs are bitwise the
// batch's, with the bias and without, on one thread and on several.
TEST(Linear, FewRowsGiveTheBatchsOutputsBitwise) {
  const int64_t M = 300, N = 200, K = 96;
  const Vec x = randn(M * K, 50), W = randn(N * K, 51), b = randn(N, 52);
  const int saved = num_threads();
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    for (bool with_bias : {true, false}) {
      Vec batch(M * N);
      linear_forward(batch.data(), x.data(), W.data(), with_bias ? b.data() : nullptr, M, N, K);
      for (int64_t rows : {1, 2, 5}) {
        Vec few(rows * N);
        const int64_t m0 = 7 * rows;
        linear_forward(few.data(), x.data() + m0 * K, W.data(), with_bias ? b.data() : nullptr, rows, N, K);
        for (int64_t i = 0; i < rows * N; i++)
          ASSERT_EQ(few[i], batch[m0 * N + i]) << "rows=" << rows << " i=" << i << " threads=" << threads;
      }
    }
  }
  set_num_threads(saved);
}

TEST(Linear, PackedWeightGivesTheSameOutputsBitwise) {
  // A weight packed once (linear_pack_weight, as generation keeps them) gives linear_forward's
  // floats: every plan (one row, a few, many row blocks; a K past one pass), with and without
  // the bias, at 1 and 3 threads.
  const int saved = num_threads();
  const LinearShape shapes[] = {{1, 1, 1}, {5, 7, 6}, {300, 200, 96}, {2, 70, 1030}, {1, 768, 48}};
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    for (const auto [M0, N, K] : shapes) {
      const Vec W = randn(N * K, 61), b = randn(N, 62);
      Vec packed(linear_packed_floats(N, K));
      linear_pack_weight(packed.data(), W.data(), N, K);
      for (int64_t M : {int64_t(1), int64_t(3), M0}) {
        const Vec x = randn(M * K, 60);
        for (bool with_bias : {true, false}) {
          Vec want(M * N, 7.0f), got(M * N, 9.0f);
          linear_forward(want.data(), x.data(), W.data(), with_bias ? b.data() : nullptr, M, N, K);
          linear_forward_packed(got.data(), x.data(), packed.data(), with_bias ? b.data() : nullptr, M, N, K);
          for (int64_t i = 0; i < M * N; i++)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
                << "M=" << M << " N=" << N << " K=" << K << " i=" << i << " threads=" << threads;
        }
      }
    }
  }
  set_num_threads(saved);
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  for (const auto [M, N, K] : kLinearShapes) {
    Vec x = randn(M * K, 33), W = randn(N * K, 34, 0.5f), b = randn(N, 35);
    const Vec R = randn(M * N, 36);
    // (Bindings captured by copy: clang before 16 cannot capture structured bindings.)
    auto loss = [&, M = M, N = N, K = K] {
      Vec y(M * N);
      linear_forward(y.data(), x.data(), W.data(), b.data(), M, N, K);
      return weighted_sum(y, R);
    };
    Vec dx(M * K, 5.0f), dW(N * K, 5.0f), db(N, 5.0f);
    linear_backward(dx.data(), false, dW.data(), false, db.data(), false, R.data(), x.data(), W.data(), M, N, K);
    const std::string tag = " (M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) + ")";
    check_grad("dx" + tag, x, dx, loss);
    check_grad("dW" + tag, W, dW, loss);
    check_grad("db" + tag, b, db, loss);
  }
}

TEST(Linear, AccFlagsAndNullOutputs) {
  const int64_t M = 9, N = 35, K = 6;
  const Vec x = randn(M * K, 37), W = randn(N * K, 38), dy = randn(M * N, 39);
  Vec gx(M * K), gW(N * K), gb(N);
  linear_backward(gx.data(), false, gW.data(), false, gb.data(), false, dy.data(), x.data(), W.data(), M, N, K);
  const Vec px = randn(M * K, 40), pW = randn(N * K, 41), pb = randn(N, 42);
  Vec ax = px, aW = pW, ab = pb;
  linear_backward(ax.data(), true, aW.data(), true, ab.data(), true, dy.data(), x.data(), W.data(), M, N, K);
  expect_sum("dx", ax, px, gx);
  expect_sum("dW", aW, pW, gW);
  expect_sum("db", ab, pb, gb);
  // Only dW requested: the same dW as when everything is requested.
  Vec only(N * K);
  linear_backward(nullptr, false, only.data(), false, nullptr, false, dy.data(), x.data(), W.data(), M, N, K);
  EXPECT_EQ(only, gW);
}

// ---------------------------------------------------------------------------------------------
// Attention

struct AttnShape {
  int64_t B, T, C, H;
};
const AttnShape kAttnShapes[] = {{1, 1, 4, 1}, {2, 5, 6, 2}, {1, 7, 12, 3}, {2, 4, 8, 1}, {1, 3, 10, 5}};

// softmax(q k^T / sqrt(hs) + causal mask) v with the whole T x T matrix, in double.
void naive_attention(std::vector<double>& y, std::vector<double>& lse, const Vec& q, const Vec& k, const Vec& v,
                     int64_t B, int64_t T, int64_t C, int64_t H) {
  const int64_t hs = C / H;
  y.assign(B * T * C, 0.0);
  lse.assign(B * H * T, 0.0);
  std::vector<double> att(T * T);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++) {
      for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++) {
          double s = 0.0;
          for (int64_t c = 0; c < hs; c++)
            s += static_cast<double>(q[(b * T + i) * C + h * hs + c]) * k[(b * T + j) * C + h * hs + c];
          att[i * T + j] = j <= i ? s / std::sqrt(static_cast<double>(hs)) : -INFINITY;
        }
      for (int64_t i = 0; i < T; i++) {
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < T; j++) mx = std::max(mx, att[i * T + j]);
        for (int64_t j = 0; j < T; j++) sum += std::exp(att[i * T + j] - mx);
        lse[(b * H + h) * T + i] = mx + std::log(sum);
        for (int64_t j = 0; j < T; j++) {
          const double p = std::exp(att[i * T + j] - mx) / sum;
          for (int64_t c = 0; c < hs; c++) y[(b * T + i) * C + h * hs + c] += p * v[(b * T + j) * C + h * hs + c];
        }
      }
    }
}

TEST(Attention, ForwardMatchesNaiveSoftmax) {
  for (const auto [B, T, C, H] : kAttnShapes) {
    const Vec q = randn(B * T * C, 50, 1.5f), k = randn(B * T * C, 51, 1.5f), v = randn(B * T * C, 52);
    Vec y(B * T * C), lse(B * H * T);
    attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H);
    std::vector<double> ry, rlse;
    naive_attention(ry, rlse, q, k, v, B, T, C, H);
    for (size_t i = 0; i < y.size(); i++) ASSERT_NEAR(y[i], ry[i], 1e-5 * (1.0 + std::fabs(ry[i]))) << i;
    for (size_t i = 0; i < lse.size(); i++) ASSERT_NEAR(lse[i], rlse[i], 1e-5 * (1.0 + std::fabs(rlse[i]))) << i;
  }
}

// attention_backward's dq, dk, dv against central differences of sum(y * R), R random.
void check_attention_backward(int64_t B, int64_t T, int64_t C, int64_t H, uint32_t seed) {
  const int64_t n = B * T * C;
  Vec q = randn(n, seed), k = randn(n, seed + 1), v = randn(n, seed + 2);
  const Vec R = randn(n, seed + 3);
  auto loss = [&] {
    Vec y(n), lse(B * H * T);
    attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H);
    return weighted_sum(y, R);
  };
  Vec y(n), lse(B * H * T);
  attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H);
  Vec dq(n, 3.0f), dk(n, 3.0f), dv(n, 3.0f);
  attention_backward(dq.data(), false, dk.data(), false, dv.data(), false, R.data(), q.data(), k.data(), v.data(),
                     y.data(), lse.data(), B, T, C, H);
  const std::string tag = " (B=" + std::to_string(B) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
                          " H=" + std::to_string(H) + ")";
  check_grad("dq" + tag, q, dq, loss);
  check_grad("dk" + tag, k, dk, loss);
  check_grad("dv" + tag, v, dv, loss);
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  for (const auto [B, T, C, H] : kAttnShapes) check_attention_backward(B, T, C, H, 53);
}

// Past one query block and past one vector of keys: rows whose visible keys end before the
// block's padded row (the zeroed tail of P and dS), and blocks that add to earlier key rows.
TEST(Attention, BackwardMatchesFiniteDifferencesOnLongerSequences) {
  const int64_t w = simd::kW;
  // Query blocks are 8 register tiles tall: T = 9 tiles + 5 crosses into a second block.
  const int64_t shapes[][4] = {
      {1, 2 * gemm::kRows + w + 3, 2 * w + 2, 2}, {1, 9 * gemm::kRows + 5, 2 * w + 2, 2}, {2, w + 5, 12, 3}};
  for (const auto& sh : shapes) check_attention_backward(sh[0], sh[1], sh[2], sh[3], 57);
}

// With dropout on the probabilities (rate 0.2, a fixed seed and step: a fixed mask), at every
// vector width: the mask factors enter the vector loops of the forward and the backward.
TEST(Attention, DropoutBackwardMatchesFiniteDifferences) {
  const int64_t w = simd::kW;
  const int64_t shapes[][4] = {{2, 5, 6, 2}, {1, 2 * gemm::kRows + w + 3, 2 * w + 2, 2}};
  ptl::dropout::Mask m;
  m.threshold = ptl::dropout::threshold_of(0.2);
  m.scale = ptl::dropout::scale_of(0.2);
  m.base = ptl::dropout::base_of(ptl::dropout::stream_of("blocks.0.attn.probs.drop"), 7, 3);
  for (const auto& [B, T, C, H] : shapes) {
    const int64_t n = B * T * C;
    Vec q = randn(n, 70), k = randn(n, 71), v = randn(n, 72);
    const Vec R = randn(n, 73);
    auto loss = [&, B = B, T = T, C = C, H = H] {
      Vec y(n), lse(B * H * T);
      attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H, m);
      return weighted_sum(y, R);
    };
    Vec y(n), lse(B * H * T), y0(n);
    attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H, m);
    attention_forward(y0.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H);
    EXPECT_NE(y, y0);  // the mask is live
    Vec dq(n), dk(n), dv(n);
    attention_backward(dq.data(), false, dk.data(), false, dv.data(), false, R.data(), q.data(), k.data(), v.data(),
                       y.data(), lse.data(), B, T, C, H, m);
    check_grad("dq (dropout)", q, dq, loss);
    check_grad("dk (dropout)", k, dk, loss);
    check_grad("dv (dropout)", v, dv, loss);
  }
}

TEST(Attention, AccFlagsAdd) {
  const int64_t B = 2, T = 5, C = 6, H = 2, n = B * T * C;
  const Vec q = randn(n, 57), k = randn(n, 58), v = randn(n, 59), dy = randn(n, 60);
  Vec y(n), lse(B * H * T);
  attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H);
  Vec gq(n), gk(n), gv(n);
  attention_backward(gq.data(), false, gk.data(), false, gv.data(), false, dy.data(), q.data(), k.data(), v.data(),
                     y.data(), lse.data(), B, T, C, H);
  const Vec pq = randn(n, 61), pk = randn(n, 62), pv = randn(n, 63);
  Vec aq = pq, ak = pk, av = pv;
  attention_backward(aq.data(), true, ak.data(), true, av.data(), true, dy.data(), q.data(), k.data(), v.data(),
                     y.data(), lse.data(), B, T, C, H);
  expect_sum("dq", aq, pq, gq);
  expect_sum("dk", ak, pk, gk);
  expect_sum("dv", av, pv, gv);
}

TEST(Attention, CachedMatchesForward) {
  // One sequence generated as a 3-token prompt followed by single tokens, through the KV cache,
  // must reproduce the rows of a full forward pass over the same q, k, v.
  const int64_t T = 7, C = 12, H = 3, ctx = 9;
  const Vec q = randn(T * C, 64), k = randn(T * C, 65), v = randn(T * C, 66);
  Vec y(T * C), lse(H * T);
  attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), 1, T, C, H);

  Vec k_cache(ctx * C, NAN), v_cache(ctx * C, NAN);  // rows past the current position are never read
  Vec yc(T * C);
  const std::vector<std::pair<int64_t, int64_t>> chunks = {{0, 3}, {3, 1}, {4, 1}, {5, 2}};  // (pos0, n)
  for (const auto& [pos0, n] : chunks) {
    kv_cache_write(k_cache.data(), v_cache.data(), k.data() + pos0 * C, v.data() + pos0 * C, n, C, pos0);
    attention_cached(yc.data() + pos0 * C, q.data() + pos0 * C, k_cache.data(), v_cache.data(), n, C, H, pos0);
  }
  for (int64_t i = 0; i < T * C; i++) {
    EXPECT_EQ(k_cache[i], k[i]);
    EXPECT_EQ(v_cache[i], v[i]);
    EXPECT_NEAR(yc[i], y[i], 1e-6f * (1.0f + std::fabs(y[i]))) << i;
  }
}

// ---------------------------------------------------------------------------------------------
// GELU and add

TEST(Gelu, ForwardValues) {
  const Vec x = {-3.0f, -1.0f, 0.0f, 0.5f, 2.0f};
  Vec y(x.size());
  gelu_forward(y.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); i++) {
    const double e = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
    EXPECT_NEAR(y[i], e, 1e-6);
  }
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  const int64_t n = 13;
  Vec x = randn(n, 70, 2.0f);
  const Vec R = randn(n, 71);
  auto loss = [&] {
    Vec y(n);
    gelu_forward(y.data(), x.data(), n);
    return weighted_sum(y, R);
  };
  Vec dx(n, 4.0f);
  gelu_backward(dx.data(), false, R.data(), x.data(), n);
  check_grad("dx", x, dx, loss);

  const Vec prior = randn(n, 72);
  Vec acc = prior;
  gelu_backward(acc.data(), true, R.data(), x.data(), n);
  expect_sum("dx acc", acc, prior, dx);
}

namespace {

// GPT-2's form (gelu_new) in double, and its derivative.
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double gelu_tanh_grad_ref(double x) {
  const double t = std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * std::sqrt(2.0 / M_PI) * (1.0 + 3.0 * 0.044715 * x * x);
}

}  // namespace

TEST(Gelu, TanhFormValues) {
  const Vec x = {-40.0f, -9.0f, -3.0f, -1.0f, -1e-3f, 0.0f, 1e-3f, 0.5f, 1.0f, 2.0f, 9.0f, 40.0f, 1e20f, -1e20f};
  const int64_t n = int64_t(x.size());
  Vec y(x.size()), exact(x.size()), dx(x.size());
  gelu_forward(y.data(), x.data(), n, Gelu::tanh);
  gelu_forward(exact.data(), x.data(), n, Gelu::erf);
  gelu_backward(dx.data(), false, Vec(x.size(), 1.0f).data(), x.data(), n, Gelu::tanh);
  for (int64_t i = 0; i < n; i++) {
    EXPECT_NEAR(y[i], gelu_tanh_ref(x[i]), 1e-6 * (1.0 + std::fabs(x[i]))) << x[i];
    EXPECT_NEAR(dx[i], std::fabs(x[i]) > 100 ? (x[i] > 0 ? 1.0 : 0.0) : gelu_tanh_grad_ref(x[i]), 2e-6) << x[i];
  }
  // Not the exact form: the two differ by about 1.5e-4 at x = 1.
  EXPECT_GT(std::fabs(y[8] - exact[8]), 1e-4);
}

TEST(Gelu, TanhBackwardMatchesFiniteDifferences) {
  const int64_t n = 13;
  Vec x = randn(n, 80, 2.0f);
  const Vec R = randn(n, 81);
  auto loss = [&] {
    Vec y(n);
    gelu_forward(y.data(), x.data(), n, Gelu::tanh);
    return weighted_sum(y, R);
  };
  Vec dx(n, 4.0f);
  gelu_backward(dx.data(), false, R.data(), x.data(), n, Gelu::tanh);
  check_grad("dx", x, dx, loss);

  const Vec prior = randn(n, 82);
  Vec acc = prior;
  gelu_backward(acc.data(), true, R.data(), x.data(), n, Gelu::tanh);
  expect_sum("dx acc", acc, prior, dx);
}

TEST(Add, BackwardMatchesFiniteDifferences) {
  const int64_t n = 6;
  const float alpha = -0.7f;
  Vec a = randn(n, 73), b = randn(n, 74);
  const Vec R = randn(n, 75);
  auto loss = [&] {
    Vec y(n);
    add_forward(y.data(), a.data(), b.data(), alpha, n);
    return weighted_sum(y, R);
  };
  Vec da(n, 2.0f), db(n, 2.0f);
  add_backward(da.data(), false, db.data(), false, R.data(), alpha, n);
  check_grad("da", a, da, loss);
  check_grad("db", b, db, loss);

  const Vec pa = randn(n, 76), pb = randn(n, 77);
  Vec aa = pa, ab = pb;
  add_backward(aa.data(), true, ab.data(), true, R.data(), alpha, n);
  expect_sum("da acc", aa, pa, da);
  expect_sum("db acc", ab, pb, db);
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy

TEST(CrossEntropy, UniformLogitsGiveLogV) {
  const int64_t M = 3, V = 11;
  const Vec logits(M * V, 0.3f);
  const std::vector<int32_t> targets = {0, 5, 10};
  float loss = -1.0f;
  Vec lse(M);
  cross_entropy_forward(&loss, lse.data(), logits.data(), targets.data(), nullptr, M, V);
  EXPECT_NEAR(loss, std::log(11.0), 1e-6);
  for (float l : lse) EXPECT_NEAR(l, 0.3 + std::log(11.0), 1e-6);
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  const int64_t M = 1, V = 3;
  const Vec logits = {1000.0f, 0.0f, -1000.0f};
  const std::vector<int32_t> targets = {1};
  float loss = 0.0f;
  cross_entropy_forward(&loss, nullptr, logits.data(), targets.data(), nullptr, M, V);
  EXPECT_NEAR(loss, 1000.0f, 1e-3f);
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  const int64_t M = 5, V = 7;
  const std::vector<int32_t> targets = {2, 0, 6, 2, 3};
  const Vec mask = {1.0f, 0.0f, 0.5f, 2.0f, 1.0f};
  for (const float* m : {static_cast<const float*>(nullptr), mask.data()}) {
    Vec logits = randn(M * V, 80, 2.0f);
    auto loss = [&] {
      float l = 0.0f;
      cross_entropy_forward(&l, nullptr, logits.data(), targets.data(), m, M, V);
      return static_cast<double>(l);
    };
    Vec lse(M);
    float l = 0.0f;
    cross_entropy_forward(&l, lse.data(), logits.data(), targets.data(), m, M, V);
    // Reference loss in double.
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < M; i++) {
      double mx = -INFINITY, s = 0.0;
      for (int64_t v = 0; v < V; v++) mx = std::max(mx, static_cast<double>(logits[i * V + v]));
      for (int64_t v = 0; v < V; v++) s += std::exp(logits[i * V + v] - mx);
      const double w = m ? m[i] : 1.0;
      num += w * (mx + std::log(s) - logits[i * V + targets[i]]);
      den += w;
    }
    EXPECT_NEAR(l, num / den, 1e-6 * (1.0 + std::fabs(num / den)));

    Vec d(M * V, 6.0f);
    cross_entropy_backward(d.data(), false, logits.data(), targets.data(), lse.data(), m, M, V);
    check_grad(m ? "dlogits (mask)" : "dlogits", logits, d, loss);
    if (m) {
      for (int64_t v = 0; v < V; v++) EXPECT_EQ(d[1 * V + v], 0.0f);  // masked-out row
    }

    const Vec prior = randn(M * V, 81);
    Vec acc = prior;
    cross_entropy_backward(acc.data(), true, logits.data(), targets.data(), lse.data(), m, M, V);
    expect_sum("dlogits acc", acc, prior, d);
  }
}

TEST(CrossEntropy, AllMaskedGivesZero) {
  const int64_t M = 2, V = 4;
  const Vec logits = randn(M * V, 82);
  const std::vector<int32_t> targets = {1, -1};  // a masked row's target is never read
  const Vec mask(M, 0.0f);
  float loss = 5.0f;
  Vec lse(M);
  cross_entropy_forward(&loss, lse.data(), logits.data(), targets.data(), mask.data(), M, V);
  EXPECT_EQ(loss, 0.0f);
  Vec d(M * V, 3.0f);
  cross_entropy_backward(d.data(), false, logits.data(), targets.data(), lse.data(), mask.data(), M, V);
  for (float g : d) EXPECT_EQ(g, 0.0f);
}

// ---------------------------------------------------------------------------------------------
// Cross-entropy of the tied output projection (cross_entropy_tied): against the unfused ops it
// replaces, linear (z = x W^T) then cross_entropy, on the stored logits.

namespace {

struct TiedResult {
  float loss = 0;
  Vec lse, dx, dW;
};

// The unfused reference: the [M, V] logits stored, then the plain kernels.
TiedResult unfused_tied(const Vec& x, const Vec& W, const std::vector<int32_t>& t, const float* mask, int64_t M,
                        int64_t V, int64_t C) {
  TiedResult r;
  Vec z(size_t(M * V)), dz(size_t(M * V));
  r.lse.resize(size_t(M));
  r.dx.resize(size_t(M * C));
  r.dW.resize(size_t(V * C));
  linear_forward(z.data(), x.data(), W.data(), nullptr, M, V, C);
  cross_entropy_forward(&r.loss, r.lse.data(), z.data(), t.data(), mask, M, V);
  cross_entropy_backward(dz.data(), false, z.data(), t.data(), r.lse.data(), mask, M, V);
  linear_backward(r.dx.data(), false, r.dW.data(), false, nullptr, false, dz.data(), x.data(), W.data(), M, V, C);
  return r;
}

TiedResult fused_tied(const Vec& x, const Vec& W, const std::vector<int32_t>& t, const float* mask, int64_t M,
                      int64_t V, int64_t C, int64_t chunk) {
  TiedResult r;
  r.lse.resize(size_t(M));
  r.dx.assign(size_t(M * C), 7.0f);  // overwritten (acc 0)
  r.dW.assign(size_t(V * C), 7.0f);
  cross_entropy_tied_forward(&r.loss, r.lse.data(), x.data(), W.data(), t.data(), mask, M, V, C, chunk);
  cross_entropy_tied_backward(r.dx.data(), false, r.dW.data(), false, x.data(), W.data(), t.data(), r.lse.data(), mask,
                              M, V, C, chunk);
  return r;
}

// max |a - b| / max |b|: the error relative to the tensor's scale (a gradient's entries span
// orders of magnitude, so an element-wise relative error would only measure the tiny ones).
double rel_err(const Vec& a, const Vec& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); i++) {
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace

TEST(CrossEntropyTied, MatchesLinearThenCrossEntropy) {
  // An odd vocabulary just above the bytes', and GPT-2's, with tiny widths and batches; chunks of
  // 64 rows (ragged last chunk), of 1000 (not a multiple of the vector width), and the automatic
  // width (one chunk here). Targets all over the vocabulary; a mask with a zero and a fractional weight.
  for (const int64_t V : {263, 50257}) {
    const int64_t M = 6, C = 8;
    const Vec x = randn(size_t(M * C), 90, 1.0f), W = randn(size_t(V * C), 91, 0.5f);
    std::vector<int32_t> t(static_cast<size_t>(M));
    for (int64_t i = 0; i < M; i++) t[size_t(i)] = int32_t((i * 7919 + 13) % V);
    t[size_t(M - 1)] = int32_t(V - 1);  // the last row of the last, ragged chunk
    const Vec mask = {1.0f, 0.0f, 0.5f, 2.0f, 1.0f, 1.0f};
    for (const float* m : {static_cast<const float*>(nullptr), mask.data()}) {
      const TiedResult ref = unfused_tied(x, W, t, m, M, V, C);
      for (const int64_t chunk : {int64_t(64), int64_t(1000), int64_t(0)}) {
        const std::string what =
            "V=" + std::to_string(V) + " chunk=" + std::to_string(chunk) + (m ? " mask" : " no mask");
        const TiedResult got = fused_tied(x, W, t, m, M, V, C, chunk);
        EXPECT_NEAR(got.loss, ref.loss, 1e-6 * std::fabs(ref.loss)) << what;
        EXPECT_LE(rel_err(got.lse, ref.lse), 1e-6) << what;
        EXPECT_LE(rel_err(got.dx, ref.dx), 1e-5) << what;
        EXPECT_LE(rel_err(got.dW, ref.dW), 1e-5) << what;
        if (chunk == 0) {
          // One chunk covers the vocabulary: the very floats of the unfused ops.
          ASSERT_EQ(cross_entropy_tied_chunk(M, V), V);
          EXPECT_EQ(got.loss, ref.loss) << what;
          EXPECT_EQ(got.lse, ref.lse) << what;
          EXPECT_EQ(got.dx, ref.dx) << what;
          EXPECT_EQ(got.dW, ref.dW) << what;
        }
      }
    }
  }
}

TEST(CrossEntropyTied, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int64_t M = 5, V = 150, C = 7, chunk = 64;  // three chunks, the last ragged
  const std::vector<int32_t> t = {2, 149, 64, 63, 100};
  const Vec mask = {1.0f, 0.5f, 0.0f, 2.0f, 1.0f};
  Vec x = randn(size_t(M * C), 92), W = randn(size_t(V * C), 93, 0.5f);
  auto loss = [&] {
    float l = 0;
    cross_entropy_tied_forward(&l, nullptr, x.data(), W.data(), t.data(), mask.data(), M, V, C, chunk);
    return double(l);
  };
  Vec lse(static_cast<size_t>(M)), dx(size_t(M * C)), dW(size_t(V * C));
  float l = 0;
  cross_entropy_tied_forward(&l, lse.data(), x.data(), W.data(), t.data(), mask.data(), M, V, C, chunk);
  cross_entropy_tied_backward(dx.data(), false, dW.data(), false, x.data(), W.data(), t.data(), lse.data(), mask.data(),
                              M, V, C, chunk);
  check_grad("dx", x, dx, loss);
  check_grad("dW", W, dW, loss);
  // Accumulating: out = prior + the fresh gradient; a null output is skipped.
  const Vec px = randn(dx.size(), 94), pW = randn(dW.size(), 95);
  Vec ax = px, aW = pW;
  cross_entropy_tied_backward(ax.data(), true, aW.data(), true, x.data(), W.data(), t.data(), lse.data(), mask.data(),
                              M, V, C, chunk);
  expect_sum("dx acc", ax, px, dx);
  expect_sum("dW acc", aW, pW, dW);
  Vec only_w = pW;
  cross_entropy_tied_backward(nullptr, false, only_w.data(), true, x.data(), W.data(), t.data(), lse.data(),
                              mask.data(), M, V, C, chunk);
  expect_sum("dW alone", only_w, pW, dW);
}

TEST(CrossEntropyTied, ForwardAndBackwardInOneCallAreBitwiseTheTwoOps) {
  // One chunk (the logits computed once) and two chunks (16 rows of 50,257: 32,768 per chunk).
  for (const auto& [M, V] : {std::pair<int64_t, int64_t>{6, 263}, {16, 50257}}) {
    const int64_t C = 8;
    const Vec x = randn(size_t(M * C), 96), W = randn(size_t(V * C), 97, 0.5f);
    std::vector<int32_t> t(static_cast<size_t>(M));
    for (int64_t i = 0; i < M; i++) t[size_t(i)] = int32_t((i * 7919 + 5) % V);
    Vec mask(size_t(M), 1.0f);
    mask[1] = 0.0f;
    const TiedResult two = fused_tied(x, W, t, mask.data(), M, V, C, 0);
    TiedResult one;
    one.lse.resize(size_t(M));
    one.dx.assign(size_t(M * C), 7.0f);
    one.dW.assign(size_t(V * C), 7.0f);
    cross_entropy_tied_forward_backward(&one.loss, one.lse.data(), one.dx.data(), false, one.dW.data(), false, x.data(),
                                        W.data(), t.data(), mask.data(), M, V, C);
    EXPECT_EQ(cross_entropy_tied_chunk(M, V) < V, M == 16);
    EXPECT_EQ(one.loss, two.loss) << V;
    EXPECT_EQ(one.lse, two.lse) << V;
    EXPECT_EQ(one.dx, two.dx) << V;
    EXPECT_EQ(one.dW, two.dW) << V;
  }
}

TEST(CrossEntropyTied, ChunksHoldAboutTwoMebibytesOfLogits) {
  EXPECT_EQ(cross_entropy_tied_chunk(16 * 96, 256), 256);     // Medium: one chunk
  EXPECT_EQ(cross_entropy_tied_chunk(16 * 96, 50257), 320);   // 1536 x 320 floats
  EXPECT_EQ(cross_entropy_tied_chunk(16 * 1024, 50257), 64);  // never below 64 rows
  EXPECT_EQ(cross_entropy_tied_chunk(1, 50257), 50257);       // a single row: all of V
}

// ---------------------------------------------------------------------------------------------
// AdamW

TEST(AdamW, SumSquares) {
  const Vec x = {1.0f, -2.0f, 0.5f, 3.0f};
  EXPECT_DOUBLE_EQ(sum_squares(x.data(), 4), 1.0 + 4.0 + 0.25 + 9.0);
  EXPECT_EQ(sum_squares(x.data(), 0), 0.0);
}

TEST(AdamW, TwoStepsMatchHandComputation) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  const double grads[2] = {0.2, -0.6};
  const double scales[2] = {1.0, 0.5};  // the second step is "clipped"
  float p = 0.5f, m = 0.0f, v = 0.0f;
  double rp = 0.5, rm = 0.0, rv = 0.0;
  for (int t = 1; t <= 2; t++) {
    const float g = static_cast<float>(grads[t - 1]);
    adamw_update(&p, &g, &m, &v, 1, static_cast<float>(lr), static_cast<float>(b1), static_cast<float>(b2),
                 static_cast<float>(eps), static_cast<float>(wd), t, static_cast<float>(scales[t - 1]));
    // The textbook update, in double.
    const double gs = grads[t - 1] * scales[t - 1];
    rm = b1 * rm + (1 - b1) * gs;
    rv = b2 * rv + (1 - b2) * gs * gs;
    const double mhat = rm / (1 - std::pow(b1, t)), vhat = rv / (1 - std::pow(b2, t));
    rp -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * rp);
    EXPECT_NEAR(m, rm, 1e-6) << "step " << t;
    EXPECT_NEAR(v, rv, 1e-6) << "step " << t;
    EXPECT_NEAR(p, rp, 1e-6) << "step " << t;
  }
}

TEST(AdamW, ManyTensorsInOnePassEqualOneAtATime) {
  // The executor hands a run of adamw ops to adamw_update_many; each tensor must come out as
  // adamw_update leaves it, bitwise, whatever the thread count and however the tensors are cut.
  const std::vector<int64_t> sizes = {1, 47, 48, 5000, 70001, 3};
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 0.1f);
  const int before = num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<Vec> p(sizes.size()), g(sizes.size()), m(sizes.size()), v(sizes.size());
    for (size_t k = 0; k < sizes.size(); k++) {
      for (Vec* x : {&p[k], &g[k], &m[k], &v[k]}) {
        x->resize(size_t(sizes[k]));
        for (auto& e : *x) e = nd(rng);
      }
      for (auto& e : v[k]) e = e * e;
    }
    auto p2 = p, m2 = m, v2 = v;
    std::vector<AdamWTensor> ts;
    for (size_t k = 0; k < sizes.size(); k++) {
      const float lr = 1e-3f * float(k + 1), wd = k % 2 ? 0.1f : 0.0f, scale = k == 3 ? 0.5f : 1.0f;
      ts.push_back(
          {p[k].data(), g[k].data(), m[k].data(), v[k].data(), sizes[k], lr, 0.9f, 0.95f, 1e-8f, wd, 7, scale});
      adamw_update(p2[k].data(), g[k].data(), m2[k].data(), v2[k].data(), sizes[k], lr, 0.9f, 0.95f, 1e-8f, wd, 7,
                   scale);
    }
    adamw_update_many(ts.data(), int64_t(ts.size()));
    for (size_t k = 0; k < sizes.size(); k++) {
      EXPECT_EQ(0, std::memcmp(p[k].data(), p2[k].data(), p[k].size() * 4))
          << "tensor " << k << ", " << threads << " threads";
      EXPECT_EQ(0, std::memcmp(m[k].data(), m2[k].data(), m[k].size() * 4)) << "tensor " << k;
      EXPECT_EQ(0, std::memcmp(v[k].data(), v2[k].data(), v[k].size() * 4)) << "tensor " << k;
    }
  }
  set_num_threads(before);
}

TEST(AdamW, FmaWithoutTheInstructionRoundsOnce) {
  // fma_by_double (the builds without a hardware FMA: WebAssembly, native128) against
  // std::fma, which C requires to round once (here the instruction, or a correct libm).
  // Random triples, and triples whose exact a b + c lies just off a float midpoint, where
  // rounding to double and then to float would round twice: the plain double expression gets
  // some of those wrong (checked below, so that this test can tell the two apart).
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-40, 40), sign(0, 1);
  int checked = 0, naive_wrong = 0;
  auto check = [&](float a, float b, float c) {
    const float want = std::fma(a, b, c), got = fma_by_double(a, b, c);
    ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << a << " * " << b << " + " << c;
    naive_wrong += float(double(a) * double(b) + double(c)) != want;
    checked++;
  };
  for (int i = 0; i < 200000; i++) {
    const float a = std::ldexp(unit(rng), expo(rng)) * (sign(rng) ? -1.0f : 1.0f);
    const float b = std::ldexp(unit(rng), expo(rng)) * (sign(rng) ? -1.0f : 1.0f);
    const float c = std::ldexp(unit(rng), expo(rng)) * (sign(rng) ? -1.0f : 1.0f);
    check(a, b, c);
  }
  // Near-midpoints: c in [1, 2) has float spacing 2^-23, double spacing 2^-52. With
  // a b = 2^-24 (1 - 2^-30) = 2^-24 - 2^-54, or 2^-24 (1 + 2^-33) = 2^-24 + 2^-57 (products
  // of two floats: (1 + 2^-15)(1 - 2^-15), (1 + 2^-11)(1 - 2^-11 + 2^-22)), a b + c lies just
  // below or above the float midpoint c + 2^-24 and rounds to it in double; the float must
  // then be c (below) or c + 2^-23 (above), not the even neighbour. Scaled by 2^e throughout.
  const float below_a = std::ldexp(1.0f + std::ldexp(1.0f, -15), -24), below_b = 1.0f - std::ldexp(1.0f, -15);
  const float above_a = std::ldexp(1.0f + std::ldexp(1.0f, -11), -24),
              above_b = 1.0f - std::ldexp(1.0f, -11) + std::ldexp(1.0f, -22);
  for (int i = 0; i < 20000; i++) {
    const int e = expo(rng);
    const float c = std::ldexp(unit(rng), e);
    check(std::ldexp(below_a, e), below_b, c);
    check(std::ldexp(above_a, e), above_b, c);
    check(std::ldexp(below_a, e), -below_b, -c);
    check(std::ldexp(above_a, e), -above_b, -c);
  }
  check(0.0f, 5.0f, -0.0f);
  check(1e30f, 1e30f, 1.0f);  // the product overflows float, not double
  check(std::ldexp(1.0f, -140), std::ldexp(1.0f, -10), std::ldexp(1.0f, -149));  // subnormal result
  EXPECT_TRUE(std::isnan(fma_by_double(INFINITY, 0.0f, 1.0f)));
  EXPECT_EQ(fma_by_double(INFINITY, 2.0f, 1.0f), INFINITY);
  EXPECT_GT(naive_wrong, 0) << "of " << checked << ": no triple needed the round-to-odd step";
}

// ---------------------------------------------------------------------------------------------
// SIMD paths against scalar references. The vector kernels process kW floats at a time and
// the matrix kernel kRows x kCols tiles (see simd.h and gemm.h); the sizes below are chosen
// around those widths (below one vector, one more than a multiple, ragged) so that every path,
// full vectors, tails and partial tiles, is compared with plain scalar code.

namespace {
std::vector<int64_t> ragged_sizes() {
  const int64_t w = simd::kW, r = gemm::kRows, c = gemm::kCols;
  return {1, 2, w - 1, w, w + 1, 2 * w + 3, r - 1, r + 1, c - 1, c + 1, 2 * c, 3 * c, 2 * c + 5};
}
}  // namespace

// These tests run at every vector width the machine has (ptl_tests, and ptl_tests_avx2 and
// ptl_tests_simd128 on an AVX-512 machine): the sizes above come from the test's own view of the
// width, so it must be the engine's.
TEST(Simd, EngineAndTestsAgreeOnTheVectorWidth) {
  EXPECT_EQ(vector_bits(), simd::kW * 32);
  RecordProperty("vector_bits", vector_bits());
}

TEST(Simd, ExpAndErfMatchLibm) {
  for (float x = -90.0f; x <= 88.0f; x += 0.0173f) {
    const double e = std::exp(static_cast<double>(x));
    const float got = simd::exp1(x);
    if (e < 1.2e-38) {  // below the normal range: flushed to zero or a tiny number is fine
      EXPECT_LE(got, 1.2e-38f) << x;
      continue;
    }
    EXPECT_NEAR(got, e, 3e-7 * e) << "exp(" << x << ")";
  }
  EXPECT_LE(simd::exp1(-INFINITY), 1.2e-38f);  // masked scores: (nearly) zero, never NaN
  for (float x = -6.0f; x <= 6.0f; x += 0.001f)
    EXPECT_NEAR(simd::erf1(x), std::erf(static_cast<double>(x)), 5e-7) << x;  // formula 1.5e-7 + float rounding
}

TEST(Simd, GeluMatchesScalarReference) {
  for (int64_t n : ragged_sizes()) {
    const Vec x = randn(n, 200, 2.5f), dy = randn(n, 201);
    Vec y(n), dx(n);
    gelu_forward(y.data(), x.data(), n);
    gelu_backward(dx.data(), false, dy.data(), x.data(), n);
    for (int64_t i = 0; i < n; i++) {
      const double xi = x[i], cdf = 0.5 * (1.0 + std::erf(xi / std::sqrt(2.0)));
      const double pdf = std::exp(-0.5 * xi * xi) / std::sqrt(2.0 * M_PI);
      ASSERT_NEAR(y[i], xi * cdf, 1e-6 * (1.0 + std::fabs(xi))) << "n=" << n << " i=" << i;
      ASSERT_NEAR(dx[i], dy[i] * (cdf + xi * pdf), 1e-6 * (1.0 + std::fabs(dy[i] * xi))) << "n=" << n << " i=" << i;
    }
    gelu_forward(y.data(), x.data(), n, Gelu::tanh);
    gelu_backward(dx.data(), false, dy.data(), x.data(), n, Gelu::tanh);
    for (int64_t i = 0; i < n; i++) {
      const double xi = x[i];
      ASSERT_NEAR(y[i], gelu_tanh_ref(xi), 1e-6 * (1.0 + std::fabs(xi))) << "tanh n=" << n << " i=" << i;
      ASSERT_NEAR(dx[i], dy[i] * gelu_tanh_grad_ref(xi), 1e-6 * (1.0 + std::fabs(dy[i] * xi)))
          << "tanh n=" << n << " i=" << i;
    }
  }
}

TEST(Simd, LinearMatchesScalarReferenceOnRaggedShapes) {
  const auto sizes = ragged_sizes();
  int cases = 0;
  for (size_t a = 0; a < sizes.size(); a++)
    for (size_t b = 0; b < sizes.size(); b++) {
      const int64_t M = sizes[a], N = sizes[b], K = sizes[(a + 2 * b) % sizes.size()];
      const Vec x = randn(M * K, 210), W = randn(N * K, 211), bias = randn(N, 212), dy = randn(M * N, 213);
      Vec y(M * N), dx(M * K), dW(N * K), db(N);
      linear_forward(y.data(), x.data(), W.data(), bias.data(), M, N, K);
      linear_backward(dx.data(), false, dW.data(), false, db.data(), false, dy.data(), x.data(), W.data(), M, N, K);
      const std::string tag = "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K);
      auto tol = [](double s, int64_t terms) { return 2e-6 * (1.0 + std::fabs(s)) * std::sqrt(double(terms)); };
      for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
          double s = bias[n];
          for (int64_t k = 0; k < K; k++) s += static_cast<double>(x[m * K + k]) * W[n * K + k];
          ASSERT_NEAR(y[m * N + n], s, tol(s, K)) << "y " << tag;
        }
      for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
          double s = 0.0;
          for (int64_t n = 0; n < N; n++) s += static_cast<double>(dy[m * N + n]) * W[n * K + k];
          ASSERT_NEAR(dx[m * K + k], s, tol(s, N)) << "dx " << tag;
        }
      for (int64_t n = 0; n < N; n++) {
        double sb = 0.0;
        for (int64_t m = 0; m < M; m++) sb += dy[m * N + n];
        ASSERT_NEAR(db[n], sb, tol(sb, M)) << "db " << tag;
        for (int64_t k = 0; k < K; k++) {
          double s = 0.0;
          for (int64_t m = 0; m < M; m++) s += static_cast<double>(dy[m * N + n]) * x[m * K + k];
          ASSERT_NEAR(dW[n * K + k], s, tol(s, M)) << "dW " << tag;
        }
      }
      cases++;
    }
  EXPECT_EQ(cases, int(sizes.size() * sizes.size()));
}

// pack_b against its definition, element by element: panel q holds B(p, q kCols + j) at
// [p][j], zero past J. Both layouts of B: rows contiguous (s_j = 1) and columns contiguous
// (s_p = 1, transposed in kW x kW register blocks, with edges in p and j below a whole block),
// and a column stride that is neither.
TEST(Gemm, PackedPanelsHoldB) {
  const int64_t W = simd::kW;
  int cases = 0;
  for (int64_t P : {int64_t(1), W - 1, W, 2 * W + 3, int64_t(67)})
    for (int64_t J : {int64_t(1), W - 1, W, W + 1, gemm::kCols, 2 * gemm::kCols + W + 3})
      for (int layout = 0; layout < 3; layout++) {
        // layout 0: B row-major [P][J + 2]; 1: B^T row-major [J][P + 3]; 2: B^T with p stride 2.
        const int64_t s_p = layout == 0 ? J + 2 : layout == 1 ? 1 : 2;
        const int64_t s_j = layout == 0 ? 1 : layout == 1 ? P + 3 : 2 * P + 1;
        const Vec src = randn(size_t(layout == 0 ? P * s_p : J * s_j), 250 + cases);
        Vec dst(gemm::packed_floats(P, J) + 16, -7.0f);
        gemm::pack_b(dst.data(), src.data(), s_p, s_j, P, J);
        for (int64_t q = 0; q < gemm::panels(J); q++)
          for (int64_t p = 0; p < P; p++)
            for (int64_t j = 0; j < gemm::kCols; j++) {
              const int64_t col = q * gemm::kCols + j;
              const float want = col < J ? src[size_t(p * s_p + col * s_j)] : 0.0f;
              ASSERT_EQ(gemm::panel(dst.data(), P, q)[p * gemm::kCols + j], want)
                  << "P=" << P << " J=" << J << " layout " << layout << " p=" << p << " column " << col;
            }
        EXPECT_EQ(dst[gemm::packed_floats(P, J)], -7.0f) << "wrote past the panels";
        cases++;
      }
  EXPECT_EQ(cases, 5 * 6 * 3);
}

// Products whose packed B is larger than L2 (1 MB) run taller row blocks (384 rows with
// AVX-512): forward and dx of such a layer, with ragged row blocks and panels, against double
// sums, and bitwise the same on 1 and 2 threads.
TEST(Linear, ProductsWithALargeBMatchReference) {
  const int64_t M = 400, N = 1100, K = 260;
  const Vec x = randn(M * K, 240), W = randn(N * K, 241), b = randn(N, 242), dy = randn(M * N, 243);
  const int before = ptl::cpu::num_threads();
  std::vector<Vec> ys, dxs;
  for (int threads : {1, 2}) {
    ptl::cpu::set_num_threads(threads);
    Vec y(M * N), dx(M * K);
    linear_forward(y.data(), x.data(), W.data(), b.data(), M, N, K);
    linear_backward(dx.data(), false, nullptr, false, nullptr, false, dy.data(), x.data(), W.data(), M, N, K);
    for (int64_t m = 0; m < M; m += 7)
      for (int64_t n = 0; n < N; n++) {
        double s = b[n];
        for (int64_t k = 0; k < K; k++) s += static_cast<double>(x[m * K + k]) * W[n * K + k];
        ASSERT_NEAR(y[m * N + n], s, 1e-5 * (1.0 + std::fabs(s)) * std::sqrt(double(K))) << "y m=" << m << " n=" << n;
      }
    for (int64_t m = 0; m < M; m += 7)
      for (int64_t k = 0; k < K; k++) {
        double s = 0.0;
        for (int64_t n = 0; n < N; n++) s += static_cast<double>(dy[m * N + n]) * W[n * K + k];
        ASSERT_NEAR(dx[m * K + k], s, 1e-5 * (1.0 + std::fabs(s)) * std::sqrt(double(N))) << "dx m=" << m << " k=" << k;
      }
    ys.push_back(y);
    dxs.push_back(dx);
  }
  ptl::cpu::set_num_threads(before);
  EXPECT_EQ(0, std::memcmp(ys[0].data(), ys[1].data(), ys[0].size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(dxs[0].data(), dxs[1].data(), dxs[0].size() * sizeof(float)));
}

// dW = dy^T x sums over the tokens in chunks of 256 (partial sums on several threads, chunk
// after chunk on one). Three layers: a wide one, whose dy rows are 4 KB or more apart (rows of
// dy^T copied into strips: inside each task on 2 threads, a chunk at a time on one), and two
// narrow ones (dy read in place), the second with a chunk of x over 512 KB (tall row blocks on
// one thread, each task packing its own panel of the chunk). Each against double sums on 1 and
// 2 threads, with ragged edges everywhere (1030 rows of dW: not a multiple of the 48-row block or
// the 12-row strip; 600 tokens: two whole chunks and part of a third; 45, 70 and 600 columns:
// part of a panel), and bitwise the same on 1 and 2 threads. db too: its column sums run in the
// same 256-token chunks and in 64-column blocks, both ragged here. A fourth layer, 300 x 1030,
// would have partials over 1 MB on 2 threads, so there each task adds all the chunks to its own
// panel of dW instead (Product::chunk_inner; chunk after chunk on one thread).
TEST(Linear, WeightGradientOverManyTokensMatchesReference) {
  struct Shape {
    int64_t M, N, K;
  };
  for (const Shape sh : {Shape{600, 1030, 45}, Shape{600, 40, 70}, Shape{600, 40, 600}, Shape{600, 300, 1030}}) {
    const int64_t M = sh.M, N = sh.N, K = sh.K;
    const Vec x = randn(M * K, 230), W = randn(N * K, 231), dy = randn(M * N, 232), prev = randn(N * K, 233);
    const Vec prev_b = randn(N, 234);
    const int before = ptl::cpu::num_threads();
    std::vector<Vec> results, db_results;
    for (int threads : {1, 2}) {
      ptl::cpu::set_num_threads(threads);
      for (bool acc : {false, true}) {
        Vec dW = prev, db = prev_b;
        linear_backward(nullptr, false, dW.data(), acc, db.data(), acc, dy.data(), x.data(), W.data(), M, N, K);
        // db: column sums over the same 600 tokens (chunks of 256, 64-column blocks, both ragged).
        for (int64_t n = 0; n < N; n++) {
          double s = acc ? prev_b[n] : 0.0;
          for (int64_t m = 0; m < M; m++) s += dy[m * N + n];
          ASSERT_NEAR(db[n], s, 2e-6 * (1.0 + std::fabs(s)) * std::sqrt(double(M)))
              << "db N=" << N << " threads=" << threads << " acc=" << acc << " n=" << n;
        }
        db_results.push_back(db);
        // Every column of dW for the small layers, every 7th (all panels, ragged edge included) for the big one.
        const int64_t k_step = N * K > 100000 ? 7 : 1;
        for (int64_t n = 0; n < N; n++)
          for (int64_t k = 0; k < K; k += (k + k_step < K ? k_step : std::max<int64_t>(1, K - 1 - k))) {
            double s = acc ? prev[n * K + k] : 0.0;
            for (int64_t m = 0; m < M; m++) s += static_cast<double>(dy[m * N + n]) * x[m * K + k];
            ASSERT_NEAR(dW[n * K + k], s, 2e-6 * (1.0 + std::fabs(s)) * std::sqrt(double(M)))
                << "N=" << N << " threads=" << threads << " acc=" << acc << " n=" << n << " k=" << k;
          }
        results.push_back(dW);
      }
    }
    ptl::cpu::set_num_threads(before);
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[2].data(), results[0].size() * sizeof(float))) << "N=" << N;
    EXPECT_EQ(0, std::memcmp(results[1].data(), results[3].data(), results[1].size() * sizeof(float))) << "N=" << N;
    EXPECT_EQ(0, std::memcmp(db_results[0].data(), db_results[2].data(), size_t(N) * sizeof(float))) << "db N=" << N;
    EXPECT_EQ(0, std::memcmp(db_results[1].data(), db_results[3].data(), size_t(N) * sizeof(float))) << "db N=" << N;
  }
}

TEST(Simd, LayerNormAndCrossEntropyMatchScalarReference) {
  for (int64_t C : ragged_sizes()) {
    const int64_t N = 5;
    const Vec x = randn(N * C, 220, 2.0f, 0.5f), w = randn(C, 221), b = randn(C, 222);
    Vec y(N * C), mean(N), rstd(N);
    layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
    for (int64_t i = 0; i < N; i++) {
      double mu = 0.0, var = 0.0;
      for (int64_t c = 0; c < C; c++) mu += x[i * C + c];
      mu /= double(C);
      for (int64_t c = 0; c < C; c++) var += (x[i * C + c] - mu) * (x[i * C + c] - mu);
      const double rs = 1.0 / std::sqrt(var / double(C) + 1e-5);
      ASSERT_NEAR(mean[i], mu, 1e-5 * (1.0 + std::fabs(mu))) << "C=" << C;
      ASSERT_NEAR(rstd[i], rs, 1e-5 * rs) << "C=" << C;
      for (int64_t c = 0; c < C; c++)
        ASSERT_NEAR(y[i * C + c], (x[i * C + c] - mu) * rs * w[c] + b[c], 2e-5 * (1.0 + std::fabs(y[i * C + c])))
            << "C=" << C;
    }
    // Cross-entropy with C classes.
    const int64_t V = C, M = 7;
    const Vec z = randn(M * V, 223, 3.0f);
    std::vector<int32_t> t(M);
    for (int64_t i = 0; i < M; i++) t[i] = int32_t((i * 5) % V);
    Vec loss(1), lse(M), d(M * V);
    cross_entropy_forward(loss.data(), lse.data(), z.data(), t.data(), nullptr, M, V);
    cross_entropy_backward(d.data(), false, z.data(), t.data(), lse.data(), nullptr, M, V);
    double total = 0.0;
    for (int64_t i = 0; i < M; i++) {
      double mx = -INFINITY, s = 0.0;
      for (int64_t v = 0; v < V; v++) mx = std::max(mx, double(z[i * V + v]));
      for (int64_t v = 0; v < V; v++) s += std::exp(z[i * V + v] - mx);
      const double l = mx + std::log(s);
      ASSERT_NEAR(lse[i], l, 1e-5 * (1.0 + std::fabs(l))) << "V=" << V;
      total += l - z[i * V + t[i]];
      for (int64_t v = 0; v < V; v++) {
        const double g = (std::exp(z[i * V + v] - l) - (v == t[i] ? 1.0 : 0.0)) / double(M);
        ASSERT_NEAR(d[i * V + v], g, 1e-6) << "V=" << V;
      }
    }
    ASSERT_NEAR(loss[0], total / double(M), 1e-5 * (1.0 + total / double(M))) << "V=" << V;
  }
}

TEST(Simd, AttentionMatchesNaiveOnLongerSequences) {
  // Past one query block (a few kRows rows) and with head sizes around the vector width.
  const int64_t w = simd::kW;
  const int64_t shapes[][4] = {{1, 4 * gemm::kRows + 3, 2 * (w + 1), 2},
                               {2, 2 * gemm::kRows + 1, 3 * (w - 1), 3},
                               {1, 70, 64, 2},
                               {1, 17 * gemm::kRows + 7, 2 * w, 2}};
  for (const auto& s : shapes) {
    const int64_t B = s[0], T = s[1], C = s[2], H = s[3];
    const Vec q = randn(B * T * C, 230), k = randn(B * T * C, 231), v = randn(B * T * C, 232);
    Vec y(B * T * C), lse(B * H * T);
    attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H);
    std::vector<double> ry, rlse;
    naive_attention(ry, rlse, q, k, v, B, T, C, H);
    for (size_t i = 0; i < y.size(); i++)
      ASSERT_NEAR(y[i], ry[i], 2e-5 * (1.0 + std::fabs(ry[i]))) << "T=" << T << " " << i;
    for (size_t i = 0; i < lse.size(); i++) ASSERT_NEAR(lse[i], rlse[i], 2e-5 * (1.0 + std::fabs(rlse[i]))) << i;
  }
}
