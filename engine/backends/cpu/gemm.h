#pragma once
// The matrix-product micro-kernel shared by linear.cpp and attention.cpp.
//
//   C[i, j] (= or +=) sum_p A(i, p) * B(p, j)      i < I, j < J, p < P
//
// B is first packed into column panels of kCols floats: panel q is the P x kCols block of
// columns [q kCols, (q + 1) kCols), stored row after row (zero-padded past J). The kernel then
// reads B strictly sequentially, whatever B's original layout (W, W^T, x, k^T ...), so none of
// the products needs an explicit transpose, and a panel row is one or two vector loads.
//
// A is read in place through two strides, A(i, p) = A[i * a_i + p * a_p], so dy^T (a_i = 1,
// a_p = N) costs nothing either.
//
// Register blocking: a tile of kRows rows x kCols columns of C stays in vector registers for
// the whole p loop. Per p the kernel loads kNV vectors of B and broadcasts kRows scalars of A
// for kRows * kNV fused multiply-adds. Every C element is one chain of multiply-adds in
// p order, added to C once at the end, so the result is the same whichever thread computes
// which tile, and whatever the tile sizes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/backends/cpu/simd.h"

namespace ptl::cpu::gemm {

constexpr int kNV = 2;                     // vectors per panel row
constexpr int64_t kCols = kNV * simd::kW;  // panel width in floats
#if defined(__AVX512F__)
constexpr int kRows = 12;  // 24 accumulators + 2 B vectors + 1 broadcast of the 32 zmm registers
#elif defined(__AVX2__)
constexpr int kRows = 6;  // 12 accumulators of the 16 ymm registers
#else
constexpr int kRows = 4;  // 8 accumulators: SSE and WebAssembly have 16 128-bit registers
#endif

enum class Store {
  overwrite,  // C = sum
  add,        // C += sum
  bias,       // C = sum + bias[j]
};

inline int64_t panels(int64_t J) { return (J + kCols - 1) / kCols; }
inline size_t packed_floats(int64_t P, int64_t J) { return size_t(P) * size_t(panels(J) * kCols); }

// Packs B(p, j) = src[p * s_p + j * s_j] (p < P, j < J) into panels at dst
// (packed_floats(P, J) floats). Panels [q0, q1) only, so several threads can share the work.
void pack_b(float* dst, const float* src, int64_t s_p, int64_t s_j, int64_t P, int64_t J, int64_t q0, int64_t q1);
// Panel q alone, to d (P x kCols floats).
void pack_panel(float* d, const float* src, int64_t s_p, int64_t s_j, int64_t P, int64_t J, int64_t q);
inline void pack_b(float* dst, const float* src, int64_t s_p, int64_t s_j, int64_t P, int64_t J) {
  pack_b(dst, src, s_p, s_j, P, J, 0, panels(J));
}
// n floats of a thread's scratch vector (grown on demand), 64-byte aligned like the engine's
// tensors: a packed panel row is then one or two whole vectors, where at malloc's 16-byte
// alignment every AVX-512 load of a panel row straddles two cache lines.
inline float* scratch(std::vector<float>& v, size_t n) {
  constexpr size_t kAlign = 64 / sizeof(float);
  if (v.size() < n + kAlign) v.resize(n + kAlign);
  const auto addr = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + (kAlign - (addr / sizeof(float)) % kAlign) % kAlign;
}

// Panel q of B packed with P rows.
inline const float* panel(const float* packed, int64_t P, int64_t q) { return packed + q * P * kCols; }

// C[0, rows) x [0, cols) against one panel Bp (cols <= kCols valid columns), summing over the
// first P rows of the panel. C and A point at the first row, C and bias at the panel's first
// column. Bp's rows are ldb floats apart: kCols for a packed panel, or the row stride of a
// row-major B read in place (then all kCols columns of every row must be readable).
void gemm_panel(float* C, int64_t ldc, const float* A, int64_t a_i, int64_t a_p, const float* Bp, int64_t ldb,
                int64_t P, int64_t cols, int64_t rows, Store store, const float* bias = nullptr);

}  // namespace ptl::cpu::gemm
