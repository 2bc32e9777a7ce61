// Linear layer: y = x W^T + b, with W stored [out, in] as in PyTorch.
//
// All three matrix products of the layer (forward y, backward dx and dW) are written as the
// same "axpy" loop nest, C[i, :] += sum_p A(i, p) * B[p, :], whose innermost loop runs over a
// contiguous row of B and C. That loop has no reduction in it, so the compiler vectorises it
// without having to reorder floating-point sums (which it is not allowed to do without
// -ffast-math), and the results do not depend on the vector width.
//
//   forward  y  = x  W^T : C = y  [M, N], A = x    [M, K], B = W^T [K, N] (transposed once)
//   backward dx = dy W   : C = dx [M, K], A = dy   [M, N], B = W   [N, K]
//   backward dW = dy^T x : C = dW [N, K], A = dy^T [N, M], B = x   [M, K]
#include <algorithm>
#include <vector>

#include "engine/backends/cpu/kernels.h"

namespace ptl::cpu {

namespace {

// Register blocking: a tile of ROWS rows x COLS columns of C is accumulated in a small local
// array over the whole p loop, so each B segment loaded from memory feeds ROWS multiply-adds
// and C is read and written once per tile instead of once per p. The tile should fill about
// half of the vector registers: 8 x 32 floats = 16 of the 32 AVX-512 registers, 4 x 32 floats
// = 8 of the 16 AVX2 registers.
#ifdef __AVX512F__
constexpr int64_t ROWS = 8;
#else
constexpr int64_t ROWS = 4;
#endif
constexpr int64_t COLS = 32;

// C[i, j] += sum_p A[i * a_i + p * a_p] * B[p * ldb + j] for i < I, j < J, p < P.
// C has row stride ldc. A is addressed through two strides so that dy^T needs no copy.
void gemm_acc(float* C, int64_t ldc, const float* A, int64_t a_i, int64_t a_p, const float* B, int64_t ldb,
              int64_t I, int64_t J, int64_t P) {
    int64_t i0 = 0;
    for (; i0 + ROWS <= I; i0 += ROWS) {
        int64_t j0 = 0;
        // Full ROWS x COLS tiles: fixed trip counts, so the accumulators stay in registers.
        for (; j0 + COLS <= J; j0 += COLS) {
            float acc[ROWS][COLS] = {};
            for (int64_t p = 0; p < P; p++) {
                const float* b = B + p * ldb + j0;
                for (int64_t r = 0; r < ROWS; r++) {
                    const float a = A[(i0 + r) * a_i + p * a_p];
                    for (int64_t j = 0; j < COLS; j++) acc[r][j] += a * b[j];
                }
            }
            for (int64_t r = 0; r < ROWS; r++)
                for (int64_t j = 0; j < COLS; j++) C[(i0 + r) * ldc + j0 + j] += acc[r][j];
        }
        // Leftover columns (J not a multiple of COLS): the same sums, straight into C.
        if (j0 < J) {
            for (int64_t p = 0; p < P; p++) {
                const float* b = B + p * ldb;
                for (int64_t r = 0; r < ROWS; r++) {
                    const float a = A[(i0 + r) * a_i + p * a_p];
                    float* c = C + (i0 + r) * ldc;
                    for (int64_t j = j0; j < J; j++) c[j] += a * b[j];
                }
            }
        }
    }
    // Leftover rows (I not a multiple of ROWS): one row at a time.
    for (int64_t i = i0; i < I; i++) {
        float* c = C + i * ldc;
        for (int64_t p = 0; p < P; p++) {
            const float a = A[i * a_i + p * a_p];
            const float* b = B + p * ldb;
            for (int64_t j = 0; j < J; j++) c[j] += a * b[j];
        }
    }
}

}  // namespace

void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t M, int64_t N, int64_t K) {
    // W^T [K, N], so that the inner loop walks a contiguous row of it. Transposing costs N*K
    // moves against M*N*K multiply-adds.
    std::vector<float> Wt(static_cast<size_t>(K * N));
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) Wt[k * N + n] = W[n * K + k];

    // Start every row of y from the bias, then accumulate x W^T on top.
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) y[m * N + n] = b ? b[n] : 0.0f;
    gemm_acc(y, N, x, K, 1, Wt.data(), N, M, N, K);
}

void linear_backward(float* dx, bool acc_dx, float* dW, bool acc_dW, float* db, bool acc_db, const float* dy,
                     const float* x, const float* W, int64_t M, int64_t N, int64_t K) {
    // y[m, n] = sum_k x[m, k] W[n, k] + b[n], so
    //   dx[m, k] = sum_n dy[m, n] W[n, k]   (dx = dy W)
    //   dW[n, k] = sum_m dy[m, n] x[m, k]   (dW = dy^T x)
    //   db[n]    = sum_m dy[m, n]
    if (dx) {
        if (!acc_dx) std::fill(dx, dx + M * K, 0.0f);
        gemm_acc(dx, K, dy, N, 1, W, K, M, K, N);
    }
    if (dW) {
        if (!acc_dW) std::fill(dW, dW + N * K, 0.0f);
        // A(n, m) = dy[m, n]: dy read down a column, one scalar per (n, m).
        gemm_acc(dW, K, dy, 1, N, x, K, N, K, M);
    }
    if (db) {
        // Column sums in double: M can be thousands of rows.
        std::vector<double> sum(static_cast<size_t>(N), 0.0);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) sum[n] += dy[m * N + n];
        for (int64_t n = 0; n < N; n++) db[n] = (acc_db ? db[n] : 0.0f) + static_cast<float>(sum[n]);
    }
}

}  // namespace ptl::cpu
