#include "engine/backends/cpu/gemm.h"

#include <algorithm>
#include <utility>

namespace ptl::cpu::gemm {

using simd::kW;
using simd::vf;

namespace {

// Stage H of an in-register transpose of the kW x kW matrix whose rows are v[0..kW): the
// off-diagonal H x H blocks of every 2H x 2H block are swapped (two shuffles per pair of rows),
// then the stages of H / 2 do the same inside every block. After the stage of H = 1, v[c]
// holds what was column c.
template <int H, size_t... L>
vf upper(vf a, vf b, std::index_sequence<L...>) {  // row r of the pair: b's lanes move up
  return __builtin_shufflevector(a, b, ((L & H) ? int(kW + L - H) : int(L))...);
}
template <int H, size_t... L>
vf lower(vf a, vf b, std::index_sequence<L...>) {  // row r + H: a's lanes move down
  return __builtin_shufflevector(a, b, ((L & H) ? int(kW + L) : int(L + H))...);
}
template <int H>
void transpose_stage(vf* v) {
  constexpr auto lanes = std::make_index_sequence<kW>{};
  for (int r = 0; r < kW; r++) {
    if (r & H) continue;
    const vf a = v[r], b = v[r + H];
    v[r] = upper<H>(a, b, lanes);
    v[r + H] = lower<H>(a, b, lanes);
  }
  if constexpr (H > 1) transpose_stage<H / 2>(v);
}
void transpose(vf* v) { transpose_stage<kW / 2>(v); }

}  // namespace

void pack_b(float* dst, const float* src, int64_t s_p, int64_t s_j, int64_t P, int64_t J, int64_t q0, int64_t q1) {
  for (int64_t q = q0; q < q1; q++) pack_panel(dst + q * P * kCols, src, s_p, s_j, P, J, q);
}

void pack_panel(float* d, const float* src, int64_t s_p, int64_t s_j, int64_t P, int64_t J, int64_t q) {
  const int64_t j0 = q * kCols, n = std::min(kCols, J - j0);
  if (s_j == 1) {
    // B rows are contiguous: copy kCols floats per row.
    for (int64_t p = 0; p < P; p++) {
      const float* s = src + p * s_p + j0;
      float* o = d + p * kCols;
      for (int64_t j = 0; j < n; j++) o[j] = s[j];
      for (int64_t j = n; j < kCols; j++) o[j] = 0.0f;
    }
  } else {
    // B columns are contiguous (B is a transposed matrix: W for the forward product, k and
    // v in attention): kW x kW blocks are read as kW vectors along p, one per column,
    // transposed in registers and stored as kW panel rows. Element by element, every float
    // would be a scalar store, and packing k^T and v^T is a large share of attention's time.
    // The edges (p past the last whole block, columns past the last whole vector) go one
    // float at a time.
    const int64_t p_full = s_p == 1 ? P / kW * kW : 0, n_full = n / kW * kW;
    for (int64_t p = 0; p < p_full; p += kW)
      for (int64_t jb = 0; jb < n_full; jb += kW) {
        vf v[kW];
        for (int r = 0; r < kW; r++) v[r] = simd::load(src + (j0 + jb + r) * s_j + p);
        transpose(v);
        for (int c = 0; c < kW; c++) simd::store(d + (p + c) * kCols + jb, v[c]);
      }
    for (int64_t j = 0; j < kCols; j++) {
      if (j >= n) {
        for (int64_t p = 0; p < P; p++) d[p * kCols + j] = 0.0f;
        continue;
      }
      const float* s = src + (j0 + j) * s_j;
      for (int64_t p = j < n_full ? p_full : 0; p < P; p++) d[p * kCols + j] = s[p * s_p];
    }
  }
}

namespace {

// One R x (NV vectors) tile of C: C[r, j] (=, += or = bias +) sum_p A(r, p) * Bp[p, j], for the
// first `cols` columns. R and NV are template parameters so that the accumulators are a fixed set
// of registers and the r and v loops unroll completely. NV < kNV serves a last panel whose valid
// columns fit in fewer vectors (d_model 48 with 32-float panels: the second panel has 16), so no
// multiply-adds go to the zero padding.
template <int R, int NV>
void tile(float* C, int64_t ldc, const float* A, int64_t a_i, int64_t a_p, const float* Bp, int64_t ldb, int64_t P,
          int64_t cols, Store store, const float* bias) {
  vf acc[R][NV];
  // The tile's lines of C are fetched for writing before the p loop, so that they arrive while
  // it runs: C is the op's output (an activation, or dW), mostly in L3 or memory, and its R
  // rows are a row of C apart, which no hardware prefetcher follows; fetched at the store,
  // every line would stall it. (WebAssembly has no prefetch: the builtin compiles to nothing.)
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) __builtin_prefetch(C + r * ldc + v * kW, 1, 3);
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[r][v] = vf{};
  for (int64_t p = 0; p < P; p++) {
    vf b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) b[v] = simd::load(Bp + p * ldb + v * kW);
    const float* a = A + p * a_p;
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
      const vf ar = simd::splat(a[r * a_i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[r][v] = simd::fmadd(ar, b[v], acc[r][v]);
    }
  }
  if (cols == NV * kW) {
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) {
        float* c = C + r * ldc + v * kW;
        vf out = acc[r][v];
        if (store == Store::add)
          out += simd::load(c);
        else if (store == Store::bias)
          out += simd::load(bias + v * kW);
        simd::store(c, out);
      }
    }
    return;
  }
  // A partial panel (the last columns of C): through a small buffer.
  for (int r = 0; r < R; r++) {
    // cols <= NV * kW, so only stored floats are read; zeroed for the compiler, which cannot see that.
    float buf[kCols] = {};
    for (int v = 0; v < NV; v++) simd::store(buf + v * kW, acc[r][v]);
    float* c = C + r * ldc;
    for (int64_t j = 0; j < cols; j++) {
      if (store == Store::add)
        c[j] += buf[j];
      else if (store == Store::bias)
        c[j] = buf[j] + bias[j];
      else
        c[j] = buf[j];
    }
  }
}

template <int NV, int... Rs>
struct Tiles {
  using Fn = void (*)(float*, int64_t, const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, Store,
                      const float*);
  static constexpr Fn table[] = {nullptr, &tile<Rs, NV>...};
};

template <int NV, int... Is>
constexpr auto make_tiles(std::integer_sequence<int, Is...>) {
  return Tiles<NV, (Is + 1)...>{};
}

}  // namespace

void gemm_panel(float* C, int64_t ldc, const float* A, int64_t a_i, int64_t a_p, const float* Bp, int64_t ldb,
                int64_t P, int64_t cols, int64_t rows, Store store, const float* bias) {
  constexpr auto wide = make_tiles<kNV>(std::make_integer_sequence<int, kRows>{});
  constexpr auto narrow = make_tiles<1>(std::make_integer_sequence<int, kRows>{});
  const auto& table = cols <= kW ? narrow.table : wide.table;
  for (int64_t i = 0; i < rows; i += kRows) {
    const int64_t r = std::min<int64_t>(kRows, rows - i);
    table[r](C + i * ldc, ldc, A + i * a_i, a_i, a_p, Bp, ldb, P, cols, store, bias);
  }
}

}  // namespace ptl::cpu::gemm
