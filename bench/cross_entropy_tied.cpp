// The loss of a large vocabulary: cross_entropy_tied (the tied projection and the cross-entropy
// over chunks of the vocabulary, no [rows, V] logits) against its peer in the same run, the
// unfused ops on stored logits (linear, cross_entropy, cross_entropy_backward, linear_backward).
// See bench/cross_entropy_tied. Each repetition times both, in alternating order; the medians
// and their ratio are printed as one JSON line per chunk width (0 = the kernel's own choice).
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "bench/bench_args.h"
#include "bench/burst_time.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"

using namespace ptl::cpu;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  const auto o = bench_options(argc, argv, {"--vocab", "--rows", "--d", "--reps", "--threads"},
                               "cross_entropy_tied [--vocab 50304] [--rows 1536] [--d 128] [--reps 5] [--threads N]");
  const int64_t V = bench_count(o, "--vocab", 50304), M = bench_count(o, "--rows", 1536),
                C = bench_count(o, "--d", 128);
  const int reps = bench_count(o, "--reps", 5);
  if (o.count("--threads")) set_num_threads(bench_count(o, "--threads", 1));
  std::mt19937 g(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto n = [](int64_t k) { return static_cast<size_t>(k); };
  std::vector<float> x(n(M * C)), W(n(V * C)), lse(n(M)), dx(n(M * C)), dW(n(V * C));
  for (auto& v : x) v = normal(g);
  for (auto& v : W) v = 0.02f * normal(g);
  std::vector<int32_t> t(n(M));
  for (auto& v : t) v = int32_t(g() % uint32_t(V));
  std::vector<float> z(n(M * V)), dz(n(M * V));  // the peer's logits and their gradient
  float loss = 0;
  auto unfused = [&] {
    linear_forward(z.data(), x.data(), W.data(), nullptr, M, V, C);
    cross_entropy_forward(&loss, lse.data(), z.data(), t.data(), nullptr, M, V);
    cross_entropy_backward(dz.data(), false, z.data(), t.data(), lse.data(), nullptr, M, V);
    linear_backward(dx.data(), false, dW.data(), false, nullptr, false, dz.data(), x.data(), W.data(), M, V, C);
  };
  for (const int64_t chunk : {int64_t(0), int64_t(64), int64_t(128), int64_t(640), int64_t(2048)}) {
    auto fused = [&] {
      cross_entropy_tied_forward(&loss, lse.data(), x.data(), W.data(), t.data(), nullptr, M, V, C, chunk);
      cross_entropy_tied_backward(dx.data(), false, dW.data(), false, x.data(), W.data(), t.data(), lse.data(), nullptr,
                                  M, V, C, chunk);
    };
    std::vector<double> tf, tu;
    for (int r = 0; r < reps; r++) {
      if (r % 2) tu.push_back(bench::burst_seconds_per_call(unfused));
      tf.push_back(bench::burst_seconds_per_call(fused));
      if (r % 2 == 0) tu.push_back(bench::burst_seconds_per_call(unfused));
    }
    const double f = median(tf), u = median(tu);
    std::printf(
        "{\"vocab\": %lld, \"rows\": %lld, \"d\": %lld, \"threads\": %d, \"chunk\": %lld, \"fused_ms\": %.2f, "
        "\"unfused_ms\": %.2f, \"unfused_over_fused\": %.3f, \"fused_scratch_mib\": %.2f, \"unfused_logits_mib\": "
        "%.1f}\n",
        (long long)V, (long long)M, (long long)C, num_threads(),
        (long long)(chunk ? chunk : cross_entropy_tied_chunk(M, V)), f * 1e3, u * 1e3, u / f,
        double(M * (chunk ? std::min(chunk, V) : cross_entropy_tied_chunk(M, V))) * 4 / 1048576.0,
        double(2 * M * V) * 4 / 1048576.0);
    std::fflush(stdout);
  }
}
