// An experiment, not the engine's code: the forward product y = x W^T in GotoBLAS's loop order
// (W^T packed in blocks of kc rows x nc columns, x copied into 12-row strips kc deep, C updated
// once per kc chunk) with the engine's own micro-kernel (gemm::gemm_panel), timed against the
// engine's linear_forward and OpenBLAS sgemm at 1 thread, medians of 9 alternated repetitions.
// It asks whether the loop order alone, with our 12 x 32 tile, closes the gap to OpenBLAS on the
// products over the most data. Three other blockings around the same micro-kernel are here too,
// so that one run compares them all:
//   "strips"  every tile over all of p, as linear_forward, but each 384-row block of x first
//             copied into 12-row strips [K][12], so a tile reads one sequential stream of A
//             instead of 12 rows a row of x apart;
//   "rows"    p in chunks of 256 outermost; per 192-row block, the rows' chunk copied
//             contiguously (rows 256 floats apart: a memcpy, no transpose); the chunk of the B
//             panel (32 KB) stays in L1 while the block's strips pass; C updated per chunk;
//   "cblk"    as "rows", with the loops ordered so that a 96 x 512 block of C stays in L2
//             across the chunks (GotoBLAS keeps C's block in cache the same way).
// Build and run:
//   g++ -std=c++20 -O3 -march=native -I. bench/goto_order.cpp <build>/libptl_engine.a -lopenblas -lpthread -o
//   /tmp/goto_order OPENBLAS_CORETYPE=SkylakeX taskset -c 0 /tmp/goto_order
// Prints per shape each variant's GFLOP/s and, in brackets, its ratio to OpenBLAS; "ptl" is
// linear_forward, "gKCxNC" the Goto order with those block sizes. A variant whose result differs
// from sgemm's by more than 1e-4 relative says so (K = 2048 sums differ by ~1.5e-4: float order).
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "engine/backends/cpu/gemm.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"
using namespace ptl::cpu;
extern "C" void openblas_set_num_threads(int);
static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void goto_forward(float* C, const float* A, const float* W, int64_t M, int64_t N, int64_t K, int64_t kc, int64_t nc) {
  constexpr int64_t R = gemm::kRows, NC = gemm::kCols;
  static std::vector<float> bblk_v, strip_v;
  float* bblk = gemm::scratch(bblk_v, size_t(kc * (nc + NC)));
  float* strip = gemm::scratch(strip_v, size_t(kc * R));
  for (int64_t jc = 0; jc < N; jc += nc) {
    const int64_t ncur = std::min(nc, N - jc), q0 = jc / NC, q1 = (jc + ncur + NC - 1) / NC;
    for (int64_t pc = 0; pc < K; pc += kc) {
      const int64_t kcur = std::min(kc, K - pc);
      for (int64_t q = q0; q < q1; q++) gemm::pack_panel(bblk + (q - q0) * kcur * NC, W + pc, 1, K, kcur, N, q);
      for (int64_t ic = 0; ic < M; ic += R) {
        const int64_t rows = std::min(R, M - ic);
        for (int64_t r = 0; r < rows; r++) {
          const float* a = A + (ic + r) * K + pc;
          for (int64_t p = 0; p < kcur; p++) strip[p * R + r] = a[p];
        }
        for (int64_t q = q0; q < q1; q++) {
          const int64_t j0 = q * NC, cols = std::min(NC, N - j0);
          gemm::gemm_panel(C + ic * N + j0, N, strip, 1, R, bblk + (q - q0) * kcur * NC, NC, kcur, cols, rows,
                           pc == 0 ? gemm::Store::overwrite : gemm::Store::add);
        }
      }
    }
  }
}

// Whole-p tiles over x copied, 384 rows at a time, into 12-row strips [K][12].
void strips_forward(float* C, const float* A, const float* W, int64_t M, int64_t N, int64_t K) {
  constexpr int64_t R = gemm::kRows, NC = gemm::kCols, MC = 32 * R;
  static std::vector<float> bp_v, st_v;
  float* bp = gemm::scratch(bp_v, gemm::packed_floats(K, N));
  float* st = gemm::scratch(st_v, size_t(MC * K));
  gemm::pack_b(bp, W, 1, K, K, N);
  for (int64_t ic = 0; ic < M; ic += MC) {
    const int64_t rows = std::min(MC, M - ic);
    for (int64_t r = 0; r < rows; r++)
      for (int64_t p = 0; p < K; p++) st[(r / R) * K * R + p * R + r % R] = A[(ic + r) * K + p];
    for (int64_t q = 0; q < gemm::panels(N); q++)
      for (int64_t s = 0; s < rows; s += R)
        gemm::gemm_panel(C + (ic + s) * N + q * NC, N, st + (s / R) * K * R, 1, R, gemm::panel(bp, K, q), NC, K,
                         std::min(NC, N - q * NC), std::min(R, rows - s), gemm::Store::overwrite);
  }
}

// p in chunks of kc; rows in blocks of mc (their chunk copied contiguously); columns in blocks
// of nc. cblk = false: chunk outermost (C updated once per chunk, from wherever it is);
// cblk = true: the chunks innermost of the blocks, so an mc x nc block of C stays in L2.
void chunk_forward(float* C, const float* A, const float* W, int64_t M, int64_t N, int64_t K, int64_t kc, int64_t mc,
                   int64_t nc, bool cblk) {
  constexpr int64_t NC = gemm::kCols;
  static std::vector<float> bp_v, ab_v;
  float* bp = gemm::scratch(bp_v, gemm::packed_floats(K, N));
  float* ab = gemm::scratch(ab_v, size_t(mc * kc));
  gemm::pack_b(bp, W, 1, K, K, N);
  auto block = [&](int64_t ic, int64_t jc, int64_t pc) {
    const int64_t rows = std::min(mc, M - ic), kcur = std::min(kc, K - pc);
    for (int64_t r = 0; r < rows; r++) std::copy(A + (ic + r) * K + pc, A + (ic + r) * K + pc + kcur, ab + r * kc);
    for (int64_t q = jc / NC; q < gemm::panels(std::min(N, jc + nc)); q++)
      gemm::gemm_panel(C + ic * N + q * NC, N, ab, kc, 1, gemm::panel(bp, K, q) + pc * NC, NC, kcur,
                       std::min(NC, N - q * NC), rows, pc == 0 ? gemm::Store::overwrite : gemm::Store::add);
  };
  if (cblk) {
    for (int64_t ic = 0; ic < M; ic += mc)
      for (int64_t jc = 0; jc < N; jc += nc)
        for (int64_t pc = 0; pc < K; pc += kc) block(ic, jc, pc);
  } else {
    for (int64_t pc = 0; pc < K; pc += kc)
      for (int64_t ic = 0; ic < M; ic += mc) block(ic, 0, pc);
  }
}

int main(int argc, char** argv) {
  set_num_threads(1);
  openblas_set_num_threads(1);
  struct S {
    const char* name;
    int64_t M, N, K;
  } shapes[] = {{"2048^3", 2048, 2048, 2048},       {"xl fc_out", 1024, 256, 1024},
                {"huge fc_out", 2048, 256, 1024},   {"huge fc_in", 2048, 1024, 256},
                {"massive fc_in", 1024, 1536, 384}, {"massive fc_out", 1024, 384, 1536}};
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto s : shapes) {
    std::vector<float> x(s.M * s.K), W(s.N * s.K), y(s.M * s.N), ref(s.M * s.N);
    for (auto& v : x) v = nd(rng);
    for (auto& v : W) v = nd(rng);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.M, s.N, s.K, 1, x.data(), s.K, W.data(), s.K, 0, ref.data(),
                s.N);
    struct V {
      const char* n;
      int64_t kc, nc;
    };
    std::vector<V> vs = {{"ptl", 0, 0},     {"blas", 0, 0},  {"g512x512", 512, 512}, {"g384x384", 384, 384},
                         {"strips", -1, 0}, {"rows", -2, 0}, {"cblk", -3, 0}};
    std::vector<std::vector<double>> t(vs.size());
    const double fl = 2.0 * s.M * s.N * s.K;
    for (int rep = 0; rep < 9; rep++)
      for (size_t v = 0; v < vs.size(); v++) {
        double t0 = now();
        if (v == 0)
          linear_forward(y.data(), x.data(), W.data(), nullptr, s.M, s.N, s.K);
        else if (v == 1)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.M, s.N, s.K, 1, x.data(), s.K, W.data(), s.K, 0,
                      y.data(), s.N);
        else if (vs[v].kc == -1)
          strips_forward(y.data(), x.data(), W.data(), s.M, s.N, s.K);
        else if (vs[v].kc == -2)
          chunk_forward(y.data(), x.data(), W.data(), s.M, s.N, s.K, 256, 192, s.N, false);
        else if (vs[v].kc == -3)
          chunk_forward(y.data(), x.data(), W.data(), s.M, s.N, s.K, 256, 96, 512, true);
        else
          goto_forward(y.data(), x.data(), W.data(), s.M, s.N, s.K, vs[v].kc, vs[v].nc);
        t[v].push_back(now() - t0);
        if (rep == 0) {
          double md = 0;
          for (size_t i = 0; i < y.size(); i++)
            md = std::max(md, (double)std::fabs(y[i] - ref[i]) / (1 + std::fabs(ref[i])));
          if (md > 1e-4) std::printf("  %s WRONG %g\n", vs[v].n, md);
        }
      }
    std::printf("%-15s", s.name);
    double blas = 0;
    {
      auto b = t[1];
      std::sort(b.begin(), b.end());
      blas = fl / b[b.size() / 2] / 1e9;
    }
    for (size_t v = 0; v < vs.size(); v++) {
      auto b = t[v];
      std::sort(b.begin(), b.end());
      double g = fl / b[b.size() / 2] / 1e9;
      std::printf(" %s %.0f (%.2f)", vs[v].n, g, g / blas);
    }
    std::printf("\n");
  }
}
