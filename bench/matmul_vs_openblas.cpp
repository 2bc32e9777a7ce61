// Our linear kernels against OpenBLAS sgemm at the presets' shapes (see bench/matmul_vs_openblas).
//
// For every preset and every linear layer shape (q/k/v/o, fc_in, fc_out, the tied logits) it
// times the three products of a linear layer, forward y = x W^T, dx = dy W and dW = dy^T x, with
// ptl::cpu::linear_forward / linear_backward and with cblas_sgemm (the same row-major operands,
// transposes by flags), both into one output buffer. Alternating A B per repetition; the median of --reps is reported.
// Same thread count on both sides. One JSON object per shape and product. With more than one thread, each side is timed
// in bursts (bench/burst_time.h says why).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_args.h"
#include "bench/burst_time.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"
#include "engine/config.h"

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

template <class F>
double time_it(F f) {
  const double t0 = now();
  f();
  return now() - t0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::vector<float> fill(size_t n, unsigned seed) {
  std::vector<float> v(n);
  unsigned s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = float(int(s >> 9) % 2001 - 1000) * 1e-3f;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) try {
  const auto o =
      bench_options(argc, argv, {"--threads", "--reps", "--presets", "--square"},
                    "bench/matmul_vs_openblas [--threads 2] [--reps 7] [--presets tiny,...,massive] [--square 1]");
  const int threads = bench_count(o, "--threads", 2), reps = bench_count(o, "--reps", 7);
  const std::string presets = o.count("--presets") ? o.at("--presets") : "tiny,small,medium,large,xl,huge,massive";
  const bool square = !o.count("--square") || o.at("--square") != "0";
  for (size_t a = 0; a < presets.size();) {  // every name checked before anything is timed
    size_t b = presets.find(',', a);
    if (b == std::string::npos) b = presets.size();
    ptl::find_preset(presets.substr(a, b - a));
    a = b + 1;
  }
  ptl::cpu::set_num_threads(threads);
  openblas_set_num_threads(threads);
  std::fprintf(stderr, "OpenBLAS core: %s, threads %d\n", openblas_get_corename(), threads);

  struct Shape {
    std::string preset, layer;
    int64_t M, N, K;
  };
  std::vector<Shape> shapes;
  if (square) shapes.push_back({"-", "square2048", 2048, 2048, 2048});
  for (size_t a = 0; a < presets.size();) {
    size_t b = presets.find(',', a);
    if (b == std::string::npos) b = presets.size();
    const ptl::Preset& p = ptl::find_preset(presets.substr(a, b - a));
    const int64_t M = int64_t(p.batch) * p.model.ctx, d = p.model.d_model;
    shapes.push_back({p.name, "qkvo", M, d, d});
    shapes.push_back({p.name, "fc_in", M, 4 * d, d});
    shapes.push_back({p.name, "fc_out", M, d, 4 * d});
    shapes.push_back({p.name, "logits", M, 256, d});
    a = b + 1;
  }
  for (const auto& s : shapes) {
    const int64_t M = s.M, N = s.N, K = s.K;
    const auto x = fill(M * K, 1), W = fill(N * K, 2), dy = fill(M * N, 3);
    const char* names[3] = {"forward", "dx", "dW"};
    for (int which = 0; which < 3; which++) {
      // Both write the same buffer: where an output lands relative to the inputs (cache
      // sets, 4 KB aliasing) moved one side's time by up to 10% (docs/lessons.md).
      std::vector<float> out(size_t(which == 0 ? M * N : which == 1 ? M * K : N * K));
      float* c = out.data();
      auto ours = [&] {
        if (which == 0) ptl::cpu::linear_forward(c, x.data(), W.data(), nullptr, M, N, K);
        if (which == 1)
          ptl::cpu::linear_backward(c, false, nullptr, false, nullptr, false, dy.data(), x.data(), W.data(), M, N, K);
        if (which == 2)
          ptl::cpu::linear_backward(nullptr, false, c, false, nullptr, false, dy.data(), x.data(), W.data(), M, N, K);
      };
      auto blas = [&] {
        if (which == 0)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x.data(), K, W.data(), K, 0.0f, c, N);
        if (which == 1)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dy.data(), N, W.data(), K, 0.0f, c, K);
        if (which == 2)
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dy.data(), N, x.data(), K, 0.0f, c, K);
      };
      ours();
      const std::vector<float> o = out;
      blas();
      const std::vector<float> e = out;
      std::vector<double> ta, tb;
      auto timed = [&](auto f) { return threads == 1 ? time_it(f) : bench::burst_seconds_per_call(f); };
      for (int r = 0; r < reps; r++) {
        if (r % 2 == 0) {
          ta.push_back(timed(ours));
          tb.push_back(timed(blas));
        } else {
          tb.push_back(timed(blas));
          ta.push_back(timed(ours));
        }
      }
      double err = 0, ref = 0;
      for (size_t i = 0; i < o.size(); i++) {
        err = std::max(err, double(std::fabs(o[i] - e[i])));
        ref = std::max(ref, double(std::fabs(e[i])));
      }
      const double flops = 2.0 * M * N * K;
      const double ga = flops / median(ta) / 1e9, gb = flops / median(tb) / 1e9;
      std::printf(
          "{\"preset\": \"%s\", \"layer\": \"%s\", \"product\": \"%s\", \"M\": %lld, \"N\": %lld, \"K\": %lld, "
          "\"threads\": %d, \"ptl_gflops\": %.1f, \"openblas_gflops\": %.1f, \"ratio\": %.3f, \"max_rel_diff\": "
          "%.2e}\n",
          s.preset.c_str(), s.layer.c_str(), names[which], (long long)M, (long long)N, (long long)K, threads, ga, gb,
          ga / gb, err / std::max(ref, 1e-30));
      std::fflush(stdout);
    }
  }
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench/matmul_vs_openblas: %s\n", e.what());
  return 1;
}
