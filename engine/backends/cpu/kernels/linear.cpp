// Linear layer: y = x W^T + b, with W stored [out, in] as in PyTorch.
//
// The three matrix products of the layer all go through the packed-panel micro-kernel of
// gemm.h, which computes C = A B with B packed into column panels first:
//
//   forward  y  = x  W^T : C = y  [M, N], A = x    [M, K], B = W^T [K, N] (packed from W's rows)
//   backward dx = dy W   : C = dx [M, K], A = dy   [M, N], B = W   [N, K]
//   backward dW = dy^T x : C = dW [N, K], A = dy^T [N, M], B = x   [M, K]
//
// Packing reads each B element once (N K or M K moves against M N K multiply-adds) and lets
// the kernel stream B sequentially, so no product needs a transposed copy of W.
//
// Threads: every product is split into tasks of (row block, column panel) of C. Each C
// element belongs to exactly one task and is summed over p in order by one thread, so the
// results are identical whatever the thread count.
#include <algorithm>
#include <vector>

#include "engine/backends/cpu/gemm.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"

namespace ptl::cpu {

namespace {

using gemm::Store;

// Rows of C per task: a few register tiles, so a task is a few microseconds of work.
constexpr int64_t kBlockRows = 4 * gemm::kRows;
// Depth of one pass over p (see Product::run): 256 x 32 floats of B = 32 KB.
constexpr int64_t kChunkP = 256;

// Scratch for packed panels, owned by the calling thread and reused across calls.
float* scratch(std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

// One product C = A B (B given as src with strides s_p, s_j), described for task splitting.
struct Product {
    float* C;
    int64_t ldc;
    const float* A;
    int64_t a_i, a_p;
    const float* src;
    int64_t s_p, s_j;
    int64_t I, J, P;
    Store store;
    const float* bias;
    float* packed;
    // A read down its columns (dy^T: a_p = N, a whole row of dy apart per p) is copied into row
    // blocks [P][kBlockRows] when its rows are far apart (>= 4 KB: then every p of a tile would
    // touch another page, and rows 4 KB apart evict each other from L1).
    float* packed_a = nullptr;
    // B is read in place when it already is row-major with whole panels (s_j = 1, J a multiple
    // of kCols) and its rows are not a multiple of 4 KB apart: packing would only copy it.
    bool direct_b = false;

    int64_t panels() const { return gemm::panels(J); }
    int64_t row_blocks() const { return (I + kBlockRows - 1) / kBlockRows; }
    int64_t tasks() const { return panels() * row_blocks(); }
    int64_t pack_tasks() const { return (direct_b ? 0 : panels()) + (packed_a ? row_blocks() : 0); }
    void pack(int64_t t) const {
        if (!direct_b) {
            if (t < panels()) return gemm::pack_b(packed, src, s_p, s_j, P, J, t, t + 1);
            t -= panels();
        }
        const int64_t rb = t, i0 = rb * kBlockRows, rows = std::min(kBlockRows, I - i0);
        float* d = packed_a + rb * P * kBlockRows;
        for (int64_t p = 0; p < P; p++)
            for (int64_t r = 0; r < rows; r++) d[p * kBlockRows + r] = A[(i0 + r) * a_i + p * a_p];
    }
    // Task t: row block t / panels, panel t % panels. Numbered along the rows of C, so that
    // each thread (which starts on its own contiguous share of the tasks) works on the rows of
    // A it wrote in the previous op, and keeps them in its cache across the panels.
    void run(int64_t t) const {
        const int64_t rb = t / panels(), q = t % panels(), i0 = rb * kBlockRows, j0 = q * gemm::kCols;
        const float* a = packed_a ? packed_a + rb * P * kBlockRows : A + i0 * a_i;
        const int64_t ai = packed_a ? 1 : a_i, ap = packed_a ? kBlockRows : a_p;
        const float* bp = direct_b ? src + j0 : gemm::panel(packed, P, q);
        const int64_t ldb = direct_b ? s_p : gemm::kCols;
        // The sum over p in chunks of kChunkP: a chunk of the B panel (kChunkP x kCols floats)
        // and of the A rows stay in L1 while every tile of the row block uses them. The first
        // chunk writes C (with the bias), the others add to it: a fixed order, whatever the
        // threads.
        for (int64_t p0 = 0; p0 < P; p0 += kChunkP) {
            const bool first = p0 == 0;
            gemm::gemm_panel(C + i0 * ldc + j0, ldc, a + p0 * ap, ai, ap, bp + p0 * ldb, ldb,
                             std::min(kChunkP, P - p0), std::min(gemm::kCols, J - j0), std::min(kBlockRows, I - i0),
                             first ? store : Store::add, first && bias ? bias + j0 : nullptr);
        }
    }
};

bool far_apart(int64_t stride_floats) { return stride_floats * 4 >= 4096; }
bool aliasing(int64_t stride_floats) { return (stride_floats * 4) % 4096 == 0; }

// Decides which operands get packed (see Product), and gives the packed ones their scratch.
void plan(Product& p, std::vector<float>& b_buf, std::vector<float>* a_buf) {
    p.direct_b = p.s_j == 1 && p.J % gemm::kCols == 0 && !aliasing(p.s_p);
    if (!p.direct_b) p.packed = scratch(b_buf, gemm::packed_floats(p.P, p.J));
    if (a_buf && p.a_i == 1 && far_apart(p.a_p))
        p.packed_a = scratch(*a_buf, size_t(p.row_blocks() * kBlockRows * p.P));
}

// Runs several products: one parallel pass packs every panel, a second computes every tile.
void run_products(const std::vector<Product>& ps) {
    std::vector<int64_t> pack_start{0}, task_start{0};
    for (const auto& p : ps) {
        pack_start.push_back(pack_start.back() + p.pack_tasks());
        task_start.push_back(task_start.back() + p.tasks());
    }
    auto which = [](const std::vector<int64_t>& start, int64_t t) {
        return size_t(std::upper_bound(start.begin(), start.end(), t) - start.begin() - 1);
    };
    parallel_for(pack_start.back(), [&](int64_t t) {
        const size_t k = which(pack_start, t);
        ps[k].pack(t - pack_start[k]);
    });
    parallel_for(task_start.back(), [&](int64_t t) {
        const size_t k = which(task_start, t);
        ps[k].run(t - task_start[k]);
    });
}

thread_local std::vector<float> t_pack_a, t_pack_b, t_pack_dy;

}  // namespace

void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t M, int64_t N, int64_t K) {
    // B(k, n) = W[n, k]: packed straight from W's rows, no transposed copy.
    Product p{y, N, x, K, 1, W, 1, K, M, N, K, b ? Store::bias : Store::overwrite, b, nullptr};
    plan(p, t_pack_a, nullptr);
    run_products({p});
}

void linear_backward(float* dx, bool acc_dx, float* dW, bool acc_dW, float* db, bool acc_db, const float* dy,
                     const float* x, const float* W, int64_t M, int64_t N, int64_t K) {
    // y[m, n] = sum_k x[m, k] W[n, k] + b[n], so
    //   dx[m, k] = sum_n dy[m, n] W[n, k]   (dx = dy W)
    //   dW[n, k] = sum_m dy[m, n] x[m, k]   (dW = dy^T x)
    //   db[n]    = sum_m dy[m, n]
    std::vector<Product> ps;
    if (dx) {
        Product p{dx, K, dy, N, 1, W, K, 1, M, K, N, acc_dx ? Store::add : Store::overwrite, nullptr, nullptr};
        plan(p, t_pack_a, nullptr);
        ps.push_back(p);
    }
    if (dW) {
        // A(n, m) = dy[m, n]: a_i = 1, so the kRows scalars of one p are adjacent in memory.
        Product p{dW, K, dy, 1, N, x, K, 1, N, K, M, acc_dW ? Store::add : Store::overwrite, nullptr, nullptr};
        plan(p, t_pack_b, &t_pack_dy);
        ps.push_back(p);
    }
    if (!ps.empty()) run_products(ps);
    if (db) {
        // Column sums in double (M can be thousands of rows), each column block by one task,
        // the rows in order.
        constexpr int64_t kColBlock = 64;
        parallel_ranges(N, kColBlock, [&](int64_t n0, int64_t n1) {
            double sum[kColBlock] = {};
            for (int64_t m = 0; m < M; m++) {
                const float* d = dy + m * N;
                for (int64_t n = n0; n < n1; n++) sum[n - n0] += d[n];
            }
            for (int64_t n = n0; n < n1; n++) db[n] = (acc_db ? db[n] : 0.0f) + static_cast<float>(sum[n - n0]);
        });
    }
}

}  // namespace ptl::cpu
