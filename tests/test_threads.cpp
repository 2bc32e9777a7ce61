// The thread pool and the determinism promise of the CPU kernels: the same seed gives bitwise
// the same results whatever the thread count (see engine/backends/cpu/thread_pool.h).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"
#include "engine/trainer.h"
#include "test_util.h"

using namespace ptl;

namespace {

// Restores the default thread count when a test ends, however it ends.
struct ThreadsGuard {
  ~ThreadsGuard() { cpu::set_num_threads(0); }
};

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Runs `f` (which fills its outputs from scratch) with 1, 2 and 3 threads and expects the
// same bytes each time.
void expect_invariant(const std::string& what, const std::function<std::vector<float>()>& f) {
  ThreadsGuard guard;
  cpu::set_num_threads(1);
  const std::vector<float> ref = f();
  for (int threads : {2, 3}) {
    cpu::set_num_threads(threads);
    for (int rep = 0; rep < 2; rep++)
      EXPECT_TRUE(bitwise_equal(f(), ref)) << what << " differs with " << threads << " threads";
  }
}

}  // namespace

TEST(ThreadPool, RunsEveryTaskOnceAndNests) {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3, 8}) {
    cpu::set_num_threads(threads);
    EXPECT_EQ(cpu::num_threads(), threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 50; rep++) cpu::parallel_for(n, [&](int64_t i) { hits[size_t(i)]++; });
      for (int64_t i = 0; i < n; i++) ASSERT_EQ(hits[size_t(i)].load(), 50) << "threads " << threads << " n " << n;
    }
    // A parallel_for inside a task runs on that task's thread.
    std::atomic<int> inner{0};
    cpu::parallel_for(4, [&](int64_t) { cpu::parallel_for(5, [&](int64_t) { inner++; }); });
    EXPECT_EQ(inner.load(), 20);
    // parallel_ranges covers [0, n) exactly.
    std::vector<int> cover(1003, 0);
    cpu::parallel_ranges(1003, 17, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; i++) cover[size_t(i)]++;
    });
    for (int c : cover) ASSERT_EQ(c, 1);
  }
}

TEST(ThreadPool, TwoCallingThreadsAtOnce) {
  // Two host threads using the kernels at the same time (two models): each call still runs
  // every task exactly once (one of them on the pool, the other on its own thread).
  ThreadsGuard guard;
  cpu::set_num_threads(2);
  std::vector<std::atomic<int>> a(1000), b(1000);
  auto hammer = [](std::vector<std::atomic<int>>& hits) {
    for (int rep = 0; rep < 200; rep++) cpu::parallel_for(int64_t(hits.size()), [&](int64_t i) { hits[size_t(i)]++; });
  };
  std::thread t1(hammer, std::ref(a)), t2(hammer, std::ref(b));
  t1.join();
  t2.join();
  for (size_t i = 0; i < a.size(); i++) {
    ASSERT_EQ(a[i].load(), 200) << i;
    ASSERT_EQ(b[i].load(), 200) << i;
  }
}

TEST(ThreadPool, EnvironmentSetsTheDefault) {
  ThreadsGuard guard;
  const char* old = std::getenv("PTL_THREADS");
  const std::string saved = old ? old : "";
  ::setenv("PTL_THREADS", "3", 1);
  EXPECT_EQ(cpu::default_num_threads(), 3);
  cpu::set_num_threads(0);
  EXPECT_EQ(cpu::num_threads(), 3);
  ::setenv("PTL_THREADS", "not a number", 1);
  EXPECT_GE(cpu::default_num_threads(), 1);
  if (old)
    ::setenv("PTL_THREADS", saved.c_str(), 1);
  else
    ::unsetenv("PTL_THREADS");
}

TEST(ThreadInvariance, Kernels) {
  // Sizes that split unevenly over 2 and 3 threads and leave ragged tiles.
  const int64_t M = 157, N = 83, K = 61;
  const auto x = randn(M * K, 1), W = randn(N * K, 2), b = randn(N, 3), dy = randn(M * N, 4);
  expect_invariant("linear_forward", [&] {
    std::vector<float> y(M * N);
    cpu::linear_forward(y.data(), x.data(), W.data(), b.data(), M, N, K);
    return y;
  });
  expect_invariant("linear_backward", [&] {
    std::vector<float> out(M * K + N * K + N);
    cpu::linear_backward(out.data(), false, out.data() + M * K, false, out.data() + M * K + N * K, false, dy.data(),
                         x.data(), W.data(), M, N, K);
    return out;
  });
  {
    // More tokens than one chunk of p (the weight gradient is then split over the tokens, with
    // partial sums), dy's rows more than 4 KB apart (dy^T is packed), and accumulation into
    // gradients that already hold values.
    const int64_t M2 = 600, N2 = 1030, K2 = 45;
    const auto x2 = randn(M2 * K2, 11), W2 = randn(N2 * K2, 12), dy2 = randn(M2 * N2, 13),
               prev = randn(M2 * K2 + N2 * K2 + N2, 14);
    expect_invariant("linear_backward (split over tokens, accumulating)", [&] {
      std::vector<float> out = prev;
      cpu::linear_backward(out.data(), true, out.data() + M2 * K2, true, out.data() + M2 * K2 + N2 * K2, true,
                           dy2.data(), x2.data(), W2.data(), M2, N2, K2);
      return out;
    });
  }
  const int64_t B = 3, T = 37, C = 24, H = 3;
  const auto q = randn(B * T * C, 5), k = randn(B * T * C, 6), v = randn(B * T * C, 7), g = randn(B * T * C, 8);
  expect_invariant("attention", [&] {
    std::vector<float> y(B * T * C), lse(B * H * T), d(3 * B * T * C);
    cpu::attention_forward(y.data(), lse.data(), q.data(), k.data(), v.data(), B, T, C, H);
    cpu::attention_backward(d.data(), false, d.data() + B * T * C, false, d.data() + 2 * B * T * C, false, g.data(),
                            q.data(), k.data(), v.data(), y.data(), lse.data(), B, T, C, H);
    y.insert(y.end(), lse.begin(), lse.end());
    y.insert(y.end(), d.begin(), d.end());
    return y;
  });
  const int64_t R = 301, D = 40;
  const auto xr = randn(R * D, 9), w = randn(D, 10), bb = randn(D, 11), dyr = randn(R * D, 12);
  expect_invariant("layernorm", [&] {
    std::vector<float> y(R * D), mean(R), rstd(R), d(R * D + 2 * D);
    cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), xr.data(), w.data(), bb.data(), R, D, 1e-5f);
    cpu::layernorm_backward(d.data(), false, d.data() + R * D, false, d.data() + R * D + D, false, dyr.data(),
                            xr.data(), w.data(), mean.data(), rstd.data(), R, D);
    y.insert(y.end(), d.begin(), d.end());
    return y;
  });
  expect_invariant("gelu", [&] {
    std::vector<float> y(R * D), d(R * D);
    cpu::gelu_forward(y.data(), xr.data(), R * D);
    cpu::gelu_backward(d.data(), false, dyr.data(), xr.data(), R * D);
    y.insert(y.end(), d.begin(), d.end());
    std::vector<float> t(R * D), dt(R * D);  // GPT-2's form
    cpu::gelu_forward(t.data(), xr.data(), R * D, cpu::Gelu::tanh);
    cpu::gelu_backward(dt.data(), false, dyr.data(), xr.data(), R * D, cpu::Gelu::tanh);
    y.insert(y.end(), t.begin(), t.end());
    y.insert(y.end(), dt.begin(), dt.end());
    return y;
  });
  const int64_t V = 53;
  std::vector<int32_t> targets(R);
  for (int64_t i = 0; i < R; i++) targets[size_t(i)] = int32_t((i * 7) % V);
  const auto logits = randn(R * V, 13);
  expect_invariant("cross_entropy", [&] {
    std::vector<float> loss(1), lse(R), d(R * V);
    cpu::cross_entropy_forward(loss.data(), lse.data(), logits.data(), targets.data(), nullptr, R, V);
    cpu::cross_entropy_backward(d.data(), false, logits.data(), targets.data(), lse.data(), nullptr, R, V);
    d.insert(d.end(), loss.begin(), loss.end());
    return d;
  });
  {
    // Several chunks of the vocabulary over rows that split unevenly.
    const int64_t Vt = 1000, Ct = 24;
    const auto xt = randn(R * Ct, 15), Wt = randn(Vt * Ct, 16);
    std::vector<int32_t> tt(R);
    for (int64_t i = 0; i < R; i++) tt[size_t(i)] = int32_t((i * 31) % Vt);
    expect_invariant("cross_entropy_tied", [&] {
      std::vector<float> out(1 + R + R * Ct + Vt * Ct);
      float *lse = out.data() + 1, *dx = lse + R, *dW = dx + R * Ct;
      cpu::cross_entropy_tied_forward(out.data(), lse, xt.data(), Wt.data(), tt.data(), nullptr, R, Vt, Ct, 128);
      cpu::cross_entropy_tied_backward(dx, false, dW, false, xt.data(), Wt.data(), tt.data(), lse, nullptr, R, Vt, Ct,
                                       128);
      return out;
    });
  }
  std::vector<int32_t> tokens(B * T);
  for (int64_t i = 0; i < B * T; i++) tokens[size_t(i)] = int32_t((i * i) % 11);
  expect_invariant("embedding_backward", [&] {
    std::vector<float> d(11 * C + T * C);
    cpu::embedding_backward(d.data(), false, d.data() + 11 * C, false, g.data(), tokens.data(), B, T, C, 11, T, 0);
    return d;
  });
  const auto big = randn(200000, 14);
  expect_invariant("sum_squares", [&] { return std::vector<float>{float(cpu::sum_squares(big.data(), 200000))}; });
}

TEST(ThreadInvariance, TrainingLossesAreBitwiseEqual) {
  // ~10 training steps of Tiny and Small with 1, 2 and 3 threads: every loss and gradient norm,
  // and the final weights, must be the same bits.
  ThreadsGuard guard;
  const std::string text = ptl::test::synthetic_text(20000);
  for (const char* preset : {"tiny", "small"}) {
    std::vector<std::vector<double>> runs;
    std::vector<std::vector<float>> weights;
    for (int threads : {1, 2, 3}) {
      cpu::set_num_threads(threads);
      const Preset& p = find_preset(preset);
      TrainConfig tc;
      tc.batch = p.batch;
      tc.steps = 10;
      tc.seed = 7;
      Trainer tr(p.model, tc);
      tr.set_corpus(text);
      std::vector<double> trace;
      for (int s = 0; s < 10; s++) {
        StepResult r = tr.train_step();
        trace.push_back(r.loss);
        trace.push_back(r.grad_norm);
      }
      runs.push_back(trace);
      const float* w = tr.store().find("blocks.0.mlp.fc_in.weight");
      weights.emplace_back(w, w + tr.store().numel("blocks.0.mlp.fc_in.weight"));
    }
    for (size_t r = 1; r < runs.size(); r++) {
      for (size_t i = 0; i < runs[0].size(); i++)
        EXPECT_EQ(runs[r][i], runs[0][i]) << preset << ": " << (i % 2 ? "grad norm" : "loss") << " of step "
                                          << i / 2 + 1 << " with " << r + 1 << " threads";
      EXPECT_TRUE(bitwise_equal(weights[r], weights[0])) << preset << ": weights differ with " << r + 1 << " threads";
    }
  }
}
