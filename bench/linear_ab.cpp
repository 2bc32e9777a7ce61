// The linear kernels of another commit against this build's, with OpenBLAS sgemm as the yardstick,
// in one process (see bench/linear_ab).
//
// bench/linear_ab compiles that commit's kernels/linear.cpp into namespace ptl::cpu::old and
// links it next to this build's engine. For every preset's layer shapes and each of the three
// products (forward, dx, dW), every repetition runs old, new and OpenBLAS in a fresh random
// order; the medians give old / OpenBLAS and new / OpenBLAS. On this host, processes run one
// after another differ by 10-30% and a fixed order favours whichever runs first after OpenBLAS
// (docs/lessons.md, "Compare variants inside one process, in random order"); inside one process
// in random order, a change of 3-5% shows.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_args.h"
#include "bench/burst_time.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"
#include "engine/config.h"

namespace ptl::cpu::old {
void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t M, int64_t N, int64_t K);
void linear_backward(float* dx, bool acc_dx, float* dW, bool acc_dW, float* db, bool acc_db, const float* dy,
                     const float* x, const float* W, int64_t M, int64_t N, int64_t K);
}  // namespace ptl::cpu::old
extern "C" void openblas_set_num_threads(int);

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
  const auto o = bench_options(argc, argv, {"--threads", "--reps", "--presets"},
                               "bench/linear_ab [REV] [--threads 1] [--reps 21] [--presets tiny,...,massive]");
  const int threads = bench_count(o, "--threads", 1), reps = bench_count(o, "--reps", 21);
  const std::string presets = o.count("--presets") ? o.at("--presets") : "tiny,small,medium,large,xl,huge,massive";
  for (size_t a = 0; a < presets.size();) {  // every name checked before anything is timed
    size_t b = presets.find(',', a);
    if (b == std::string::npos) b = presets.size();
    ptl::find_preset(presets.substr(a, b - a));
    a = b + 1;
  }
  ptl::cpu::set_num_threads(threads);
  openblas_set_num_threads(threads);
  struct Shape {
    std::string name;
    int64_t M, N, K;
  };
  std::vector<Shape> shapes;
  for (size_t a = 0; a < presets.size();) {
    size_t b = presets.find(',', a);
    if (b == std::string::npos) b = presets.size();
    const ptl::Preset& p = ptl::find_preset(presets.substr(a, b - a));
    const int64_t M = int64_t(p.batch) * p.model.ctx, d = p.model.d_model;
    shapes.push_back({p.name + " qkvo", M, d, d});
    shapes.push_back({p.name + " fc_in", M, 4 * d, d});
    shapes.push_back({p.name + " fc_out", M, d, 4 * d});
    shapes.push_back({p.name + " logits", M, 256, d});
    a = b + 1;
  }
  std::mt19937 rng(7);
  const char* names[3] = {"forward", "dx", "dW"};
  int better = 0, worse = 0, differ = 0;
  std::printf("%-16s %-7s  old/OpenBLAS  new/OpenBLAS  (threads %d, medians of %d, random order)\n", "layer", "product",
              threads, reps);
  for (const auto& s : shapes) {
    const int64_t M = s.M, N = s.N, K = s.K;
    std::vector<float> x(M * K), W(N * K), dy(M * N);
    for (auto* v : {&x, &W, &dy})
      for (auto& f : *v) f = float(int(rng() % 2001) - 1000) * 1e-3f;
    for (int which = 0; which < 3; which++) {
      const size_t n_out = size_t(which == 0 ? M * N : which == 1 ? M * K : N * K);
      // One output buffer for all three: with a buffer each, identical code came out up to 10%
      // apart in this harness (where a buffer lands against the inputs is part of the time).
      std::vector<float> out(n_out);
      auto run = [&](int v) {
        float* o = out.data();
        if (v == 2) {
          if (which == 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x.data(), K, W.data(), K, 0.0f, o, N);
          if (which == 1)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dy.data(), N, W.data(), K, 0.0f, o,
                        K);
          if (which == 2)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dy.data(), N, x.data(), K, 0.0f, o, K);
          return;
        }
        const auto fwd = v == 0 ? &ptl::cpu::old::linear_forward : &ptl::cpu::linear_forward;
        const auto bwd = v == 0 ? &ptl::cpu::old::linear_backward : &ptl::cpu::linear_backward;
        if (which == 0) fwd(o, x.data(), W.data(), nullptr, M, N, K);
        if (which == 1) bwd(o, false, nullptr, false, nullptr, false, dy.data(), x.data(), W.data(), M, N, K);
        if (which == 2) bwd(nullptr, false, o, false, nullptr, false, dy.data(), x.data(), W.data(), M, N, K);
      };
      run(0);
      const std::vector<float> out_old = out;
      run(1);
      const bool same = out == out_old;
      run(2);
      differ += !same;
      std::vector<double> t[3];
      int order[3] = {0, 1, 2};
      for (int r = 0; r < reps; r++) {
        std::shuffle(order, order + 3, rng);
        for (int v : order) {
          if (threads > 1) {  // in bursts (bench/burst_time.h)
            t[v].push_back(bench::burst_seconds_per_call([&] { run(v); }));
            continue;
          }
          const double t0 = now();
          run(v);
          t[v].push_back(now() - t0);
        }
      }
      const double blas = median(t[2]), r_old = blas / median(t[0]), r_new = blas / median(t[1]);
      const char* mark = r_new > r_old * 1.03 ? "+" : r_new < r_old * 0.97 ? "-" : "";
      better += *mark == '+';
      worse += *mark == '-';
      std::printf("%-16s %-7s  %12.3f  %12.3f  %s%s\n", s.name.c_str(), names[which], r_old, r_new, mark,
                  same ? "" : "  (results differ from old's)");
      std::fflush(stdout);
    }
  }
  std::printf("new faster by > 3%%: %d, slower by > 3%%: %d; results not bitwise old's: %d\n", better, worse, differ);
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench/linear_ab: %s\n", e.what());
  return 1;
}
