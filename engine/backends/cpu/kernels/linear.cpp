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
// Threads: every product is split into tasks of (row block, column panel) of C, or of whole
// row blocks for dW of the wide layers (Product::a_columns), and dW also over chunks of the
// tokens. Each C element (or chunk's partial sum) belongs to exactly one task and is summed over
// p in order by one thread, and the chunks are added in order, so the results are identical
// whatever the thread count.
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
// Depth of one pass over p of a product split over p (see Product::partial, whole_p).
constexpr int64_t kChunkP = 256;
// L1 data cache per core of the machines we measure on (AMD Zen 5).
constexpr size_t kL1Bytes = 48 << 10;
// L2 per core (1 MB).
constexpr size_t kL2Bytes = size_t(1) << 20;

// kRows floats of a strip: a fixed count, so the compiler emits a few vector moves, where
// std::copy_n of a run-time count called memmove for every 48 bytes (16 in WebAssembly): the
// fc_in layers' dW of XL, Huge and Massive (bench/linear_ab, two runs each), at one thread 0.88 /
// 0.95, 0.92 / 0.98, 0.83 / 0.93 -> 0.98 / 0.99, 0.99 / 1.02, 0.90 / 0.97 of OpenBLAS; at two
// threads 0.94 / 0.97, 0.84 / 0.87, 0.89 / 0.91 -> 0.98 / 0.97, 0.91 / 0.92, 0.94 / 0.94.
// Rows r_n <= kRows of a strip, np values of p: d[p kRows + r] = a[p a_p + r].
inline void copy_strip(const float* a, int64_t a_p, int64_t r_n, float* __restrict d, int64_t np) {
    if (r_n == gemm::kRows) {
        for (int64_t p = 0; p < np; p++)
#pragma GCC unroll 16
            for (int r = 0; r < gemm::kRows; r++) d[p * gemm::kRows + r] = a[p * a_p + r];
    } else {
        for (int64_t p = 0; p < np; p++) std::copy_n(a + p * a_p, r_n, d + p * gemm::kRows);
    }
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
    // A read down its columns (dy^T of dW: a_i = 1, a_p = N, a whole row of dy apart per p):
    // then a task is a whole row block of C (every panel), and it first copies its rows of A,
    // one chunk of p at a time, into strips [kChunkP][kRows], one per register tile (see
    // run_columns). Read in place, the kRows values of one p are a piece of a cache line, a row
    // of dy apart from the next p's: a row block's chunk of A then spans more lines than L1
    // holds next to the B chunk, and every panel fetched them again (Huge's fc_in dW at one
    // thread: 0.44-0.70 of OpenBLAS). Packed once per task, the strips are read end to end by
    // every panel. Packing inside the task, not in a pass of its own, also spares a round trip
    // of all of A through memory.
    bool a_columns = false;
    // B is read in place when it already is row-major with whole panels (s_j = 1, J a multiple
    // of kCols) and its rows are less than 4 KB apart: packing would only copy it. Rows a
    // multiple of 4 KB apart map to the same cache sets; rows further apart than a page leave
    // every row of a panel on a page of its own, where the hardware prefetchers (which stop at
    // page boundaries) do not follow, and each row is a cache miss of its own (Massive's
    // fc_out, rows of 6 KB: dW 0.79-0.86 of OpenBLAS in place, 0.89-0.94 packed; dx
    // 0.81-0.93 -> 0.85-0.95; 1 thread, three alternated rounds). Products with partial sums
    // are the exception (see plan()). And the rows of B that a tile sums over, one panel wide,
    // must fit in L1: a row block reads the panel once per tile, and a panel read in place is
    // 128 bytes from each of P rows, scattered over P / 8 pages or more, where the packed panel
    // is one run of memory (the fc_in layers' dx, a 1024 x 256 W: XL 0.89 -> 1.01-1.05 of
    // OpenBLAS packed, Huge 0.92-0.94 -> 1.07-1.11, Massive's 1536 x 384 0.94-0.99 -> 1.00-1.05;
    // one thread, randomised-order A/B, three runs).
    bool direct_b = false;
    // Split over p as well (dW = dy^T x, whose p runs over the tokens): the sum over chunk c of
    // kChunkP values of p goes to partial[c - 1] (chunk 0 to C itself), and finish() adds the
    // partials to C in chunk order. That is exactly the order in which run() adds the chunks
    // when it does them one after another, so the floats are the same; but now each thread
    // reads only the tokens it produced (the rows of dy and x in its own cache), and only the
    // small partial products of the weights' shape cross between cores.
    float* partial = nullptr;
    // On one thread, a product that would have partials (dW) goes chunk after chunk instead
    // (GotoBLAS's order: the tasks of chunk c add its part of the sum to C before any task of
    // chunk c + 1 runs). Each chunk of A and B is then read once and stays in L2 while its
    // tasks run, while C, here the smallest of the three, is read and written once per chunk.
    // The additions are the same as with the partials, in the same order, so the same floats.
    // (Row block by row block over all of p instead, the tiles fetched their rows of dy and x
    // from L3 again for every panel: Huge's dW at one thread, randomised-order A/B, fc_out
    // 0.77 -> 0.87 of OpenBLAS in one run and 0.93 both ways in the next, q/k/v/o 0.99-1.00
    // -> 1.03.)
    bool chunk_outer = false;
    // At several threads, a product that would have partials larger than L2 (dW of the fc
    // layers from Medium up whose dy is read in place, and of Huge's and Massive's q/k/v/o and
    // logits: 1.1-7 MB of partials) is split by C's columns instead:
    // each task, one panel of C, adds the chunks to it one after another, as chunk_outer does
    // on one thread, so no partials are written or read back (the same floats again). Each
    // thread then reads all the tokens of its panels rather than only its own, which costs
    // less here than the partials' round trip through memory (bench/linear_ab at 2 threads,
    // two runs: fc_out dW of XL 0.88 / 0.95 -> 1.09 / 1.04 of OpenBLAS, Huge 0.80 / 0.76 ->
    // 0.90 / 0.96, Massive 0.89 / 0.86 -> 0.98 / 1.05).
    bool chunk_inner = false;
    // A chunk-outer product with a_columns packs all of a chunk's strips at once, in the chunk's
    // first task (one thread runs the tasks in order): into a_strips, strip s (rows [s kRows,
    // (s + 1) kRows) of C) at s kRows kChunkP. That pass reads dy's rows whole, front to back,
    // where each task copying its own strips reads 48 floats from each of 256 rows a page or
    // more apart: a cache miss per row that the hardware prefetchers, which stop at page
    // boundaries, do not hide (Huge's fc_in dW at one thread, randomised-order A/B against
    // OpenBLAS: 0.90-0.91 -> 0.92-0.98 over three runs; Massive's fc_in 0.83-0.93 -> 0.86-0.94).
    float* a_strips = nullptr;
    // A product split over p with one row block and a B that is not read in place (dW of the
    // fc_out layers: B = x, rows of 4 KB or more) packs each task's panel of its chunk, 256 rows
    // x kCols, in the task itself, into a buffer that stays in L1 while the tiles read it.
    // Every such piece is used by exactly one task, so nothing is packed twice; a packing pass
    // of its own would instead send all of x (Huge: 8 MB) through memory twice more, once to
    // write the packed copy and once to read it back. Randomised-order A/B against OpenBLAS,
    // one output buffer (bench/linear_ab), two runs of 31 each: one thread (chunk after chunk),
    // Huge's fc_out dW 0.91 -> 0.99 of OpenBLAS both times, XL's 0.91 / 0.95 -> 0.99 / 0.98,
    // Massive's 0.92 -> 0.96 / 0.97; two threads (partials, where Massive's x was read in
    // place), Massive's fc_out dW 5-8% faster, XL's and Huge's no change. The same floats.
    bool pack_in_task = false;

    // Each tile sums over all of p in one pass, which only a product that is never split over
    // p (see partial) may do: forward and dx. Summed in chunks of kChunkP instead, a chunk of
    // the B panel stays in L1 while the row block's tiles use it, but every chunk after the
    // first reads and writes the C tile again, and that cost more than L2's bandwidth to the
    // B panel (2048^3 at one thread: forward 0.80 -> 0.91 of OpenBLAS, dx 0.88 -> 0.96;
    // medians of 21 repetitions in random order).
    bool whole_p = false;

    // Rows of C per task. A task runs its row block against one panel, and the tasks are
    // numbered along the rows of C (see run()). Where B is larger than an L2 cache (1 MB here),
    // every row block streams all of B from L3 again, so the row blocks are 8 times taller:
    // a panel of B then serves 384 rows (AVX-512) from L2 before the next one comes, while the
    // row block of A stays in L3. (Session 3 numbered such tiles panel by panel instead, every
    // panel streaming all of A: 2048^3 at 0.56x of OpenBLAS along 48-row blocks, 0.82x panel by
    // panel. Against panel by panel, at one thread, randomised-order A/B, two runs: 2048^3 dx
    // 0.80 / 0.89 -> 0.86 / 0.98, forward 0.76 / 0.72 -> 0.86 / 0.75; Massive's fc_out dx
    // 0.98 / 1.02 -> 1.02 / 1.04; Massive's fc_in forward no change, and it takes 48-row
    // blocks since session 11: see plan().)
    int64_t block_rows = kBlockRows;

    int64_t panels() const { return gemm::panels(J); }
    int64_t row_blocks() const { return (I + block_rows - 1) / block_rows; }
    bool split_p() const { return partial || chunk_outer; }
    // Summed chunk by chunk, by one task per chunk or by every task over all of them.
    bool by_chunk() const { return split_p() || chunk_inner; }
    int64_t all_chunks() const { return (P + kChunkP - 1) / kChunkP; }
    int64_t chunks() const { return split_p() ? all_chunks() : 1; }
    int64_t tasks() const { return chunks() * (a_columns ? 1 : panels()) * row_blocks(); }
    int64_t pack_tasks() const { return direct_b || pack_in_task ? 0 : panels(); }
    // Multiply-adds of one task: a row block (a_columns) or a tile, over one chunk or all of p.
    int64_t task_work() const { return block_rows * (a_columns ? J : gemm::kCols) * (split_p() ? std::min(P, kChunkP) : P); }
    void pack(int64_t t) const { gemm::pack_b(packed, src, s_p, s_j, P, J, t, t + 1); }
    // Chunk c of the sum: where it goes and how it is stored. Chunk 0 writes C (with the bias);
    // a later one adds to C, or overwrites its own partial (see partial).
    float* chunk_out(int64_t c) const { return c == 0 || !partial ? C : partial + (c - 1) * I * ldc; }
    Store chunk_store(int64_t c) const { return c == 0 ? store : partial ? Store::overwrite : Store::add; }
    // A task of a product with a_columns: row block rb, chunk c (or all chunks, in order).
    void run_columns(int64_t t) const {
        static thread_local std::vector<float> strips;
        const int64_t c_first = split_p() ? t / row_blocks() : 0, c_end = split_p() ? c_first + 1 : all_chunks();
        const int64_t rb = t % row_blocks(), i0 = rb * kBlockRows, rows = std::min(kBlockRows, I - i0);
        constexpr int64_t R = gemm::kRows;
        for (int64_t c = c_first; c < c_end; c++) {
            const int64_t p0 = c * kChunkP, np = std::min(kChunkP, P - p0);
            float* buf;
            if (a_strips) {
                buf = a_strips + i0 * kChunkP;
                if (rb == 0) pack_strips(p0, np);
            } else {
                buf = gemm::scratch(strips, size_t(kBlockRows * kChunkP));
                for (int64_t s0 = 0; s0 < rows; s0 += R) {
                    float* d = buf + s0 * kChunkP;
                    const float* a = A + (i0 + s0) + p0 * a_p;
                    const int64_t r_n = std::min(R, rows - s0);
                    copy_strip(a, a_p, r_n, d, np);
                }
            }
            float* out = chunk_out(c);
            const Store st = chunk_store(c);
            for (int64_t q = 0; q < panels(); q++) {
                const int64_t j0 = q * gemm::kCols, cols = std::min(gemm::kCols, J - j0);
                const int64_t ldb = direct_b ? s_p : gemm::kCols;
                const float* bp = (direct_b ? src + j0 : gemm::panel(packed, P, q)) + p0 * ldb;
                for (int64_t s0 = 0; s0 < rows; s0 += R)
                    gemm::gemm_panel(out + (i0 + s0) * ldc + j0, ldc, buf + s0 * kChunkP, 1, R, bp, ldb, np, cols,
                                     std::min(R, rows - s0), st, c == 0 && bias ? bias + j0 : nullptr);
            }
        }
    }
    // All strips of chunk [p0, p0 + np) into a_strips, reading kStripP rows of dy at a time
    // (kStripP whole rows stay in L1 while every strip takes its piece of them).
    void pack_strips(int64_t p0, int64_t np) const {
        constexpr int64_t R = gemm::kRows, kStripP = 8;
        const int64_t n_strips = (I + R - 1) / R;
        for (int64_t pb = 0; pb < np; pb += kStripP) {
            const int64_t pn = std::min(kStripP, np - pb);
            for (int64_t s = 0; s < n_strips; s++) {
                float* d = a_strips + s * R * kChunkP + pb * R;
                const float* a = A + s * R + (p0 + pb) * a_p;
                const int64_t r_n = std::min(R, I - s * R);
                copy_strip(a, a_p, r_n, d, pn);
            }
        }
    }
    // Task t: (chunk,) row block, panel, numbered along the rows of C (or the chunks of p), so
    // that each thread (which starts on its own contiguous share of the tasks) works on the
    // data it wrote in the previous op and keeps it in its cache across the panels.
    void run(int64_t t) const {
        if (a_columns) return run_columns(t);
        const int64_t per_chunk = panels() * row_blocks();
        const int64_t c = t / per_chunk;
        t %= per_chunk;
        const int64_t rb = t / panels(), q = t % panels(), i0 = rb * block_rows, j0 = q * gemm::kCols;
        const float* a = A + i0 * a_i;
        const int64_t ai = a_i, ap = a_p;
        const float* bp = direct_b ? src + j0 : packed ? gemm::panel(packed, P, q) : nullptr;  // null: pack_in_task
        const int64_t ldb = direct_b ? s_p : gemm::kCols;
        const int64_t cols = std::min(gemm::kCols, J - j0), rows = std::min(block_rows, I - i0);
        if (by_chunk()) {
            for (int64_t cc = chunk_inner ? 0 : c; cc < (chunk_inner ? all_chunks() : c + 1); cc++) {
                const int64_t p0 = cc * kChunkP, np = std::min(kChunkP, P - p0);
                const float* b = pack_in_task ? nullptr : bp + p0 * ldb;
                if (pack_in_task) {
                    thread_local std::vector<float> chunk_panel;
                    float* buf = gemm::scratch(chunk_panel, size_t(kChunkP * gemm::kCols));
                    gemm::pack_panel(buf, src + p0 * s_p, s_p, s_j, np, J, q);
                    b = buf;
                }
                gemm::gemm_panel(chunk_out(cc) + i0 * ldc + j0, ldc, a + p0 * ap, ai, ap, b, ldb, np, cols, rows,
                                 chunk_store(cc), cc == 0 && bias ? bias + j0 : nullptr);
            }
            return;
        }
        // The sum over p in chunks (see whole_p). The first chunk writes C (with the bias), the
        // others add to it: a fixed order, whatever the threads.
        const int64_t chunk = whole_p ? P : kChunkP;
        for (int64_t p0 = 0; p0 < P; p0 += chunk) {
            const bool first = p0 == 0;
            gemm::gemm_panel(C + i0 * ldc + j0, ldc, a + p0 * ap, ai, ap, bp + p0 * ldb, ldb,
                             std::min(chunk, P - p0), cols, rows, first ? store : Store::add,
                             first && bias ? bias + j0 : nullptr);
        }
    }
    // C += the partials, in chunk order, over rows [r0, r1) of C.
    // Row by row, so that a row of C stays in L1 while every chunk's partial is added to it.
    void finish(int64_t r0, int64_t r1) const {
        for (int64_t i = r0; i < r1; i++) {
            float* __restrict c_row = C + i * ldc;
            for (int64_t c = 1; c < chunks(); c++) {
                const float* __restrict part = partial + (c - 1) * I * ldc + i * ldc;
                for (int64_t j = 0; j < J; j++) c_row[j] = part[j] + c_row[j];
            }
        }
    }
};

bool aliasing(int64_t stride_floats) { return (stride_floats * 4) % 4096 == 0; }

// Decides which operands get packed (see Product), and gives the packed ones their scratch.
// p_buf: the product may be split over p (see Product::partial), with partials in p_buf.
void plan(Product& p, std::vector<float>& b_buf, std::vector<float>* p_buf = nullptr, std::vector<float>* a_buf = nullptr) {
    // Rows of A at least 4 KB apart (dW of a layer with 1024 outputs or more); closer rows are
    // read in place, where the copy cost more than it saved (Medium's dW: 0.95-1.04 of OpenBLAS
    // packed, 1.07-1.17 in place, one thread).
    p.a_columns = p.a_i == 1 && p.a_p * 4 >= 4096;
    p.whole_p = !p_buf;
    // Only worth it with several threads and several chunks; with one thread the partials would
    // be pure overhead (and the result is the same either way).
    const size_t partial_floats = size_t((p.P - 1) / kChunkP * p.I * p.ldc);
    if (p_buf && num_threads() > 1 && p.P > kChunkP && !p.a_columns && partial_floats * sizeof(float) > kL2Bytes)
        p.chunk_inner = true;
    else if (p_buf && num_threads() > 1 && p.P > kChunkP && p.ldc == p.J)
        p.partial = gemm::scratch(*p_buf, partial_floats);
    else if (p_buf && num_threads() == 1 && p.P > kChunkP)
        p.chunk_outer = true;
    if (p.chunk_outer && p.a_columns && a_buf)
        p.a_strips = gemm::scratch(*a_buf, size_t((p.I + gemm::kRows - 1) / gemm::kRows * gemm::kRows * kChunkP));
    // A task of a product split over p reads only its chunk of B.
    const int64_t rows_of_b = p.by_chunk() ? std::min(p.P, kChunkP) : p.P;
    // B rows a page or more apart (see direct_b) are packed, except for a product with partials
    // and several row blocks: there each task reads its chunk of B once, and the packing pass,
    // which reads B in the same page-crossing order and hands half the panels to the other core,
    // cost more than it saved (Massive at 2 threads: linear_backward 268 ms in place, 287 ms
    // packed, medians of 3; before pack_in_task). A panel of the rows a task sums over that does
    // not fit in L1 is packed too (see direct_b).
    const bool row_major = p.s_j == 1 && p.J % gemm::kCols == 0 && !aliasing(p.s_p);
    const bool fits_l1 = size_t(rows_of_b * gemm::kCols) * sizeof(float) <= kL1Bytes;
    const bool b_in_place = row_major && p.s_p * 4 < 4096 && fits_l1;
    p.direct_b = b_in_place || (row_major && p.partial && fits_l1);
    // Chunk after chunk, C's tiles pass through L2 as well, once per chunk, and evict B: there
    // the tall blocks pay from a chunk of B of half of L2 (Huge's fc_out dW, B chunk 1 MB, at
    // one thread: 0.87 -> 0.93 of OpenBLAS; products summed in one pass with exactly 1 MB of B
    // lost 1-3% with tall blocks).
    const size_t tall_from = p.chunk_outer || p.chunk_inner ? kL2Bytes / 2 : kL2Bytes;
    // Except for a product summed in one pass whose A rows are short (a 48-row block of A within
    // a quarter of L2: P up to 1365, here Massive's fc_in forward and fc_out dx, P = 384): there
    // the 48-row blocks, which stream B from L3 once per block, measured faster than tall ones
    // (Massive's fc_in forward, bench/linear_ab at one thread, medians of 21-31: 0.86 / 0.84 /
    // 0.83 -> 0.87 / 0.88 / 0.86 of OpenBLAS; at two threads 0.96 -> 0.99; its fc_out dx
    // unchanged). Why is not established: a tall block's tiles each start 12 short streams of A.
    const bool short_a = p.whole_p && size_t(kBlockRows * p.P) * sizeof(float) <= kL2Bytes / 4;
    if (!p.a_columns && !short_a && gemm::packed_floats(rows_of_b, p.J) * sizeof(float) > tall_from)
        p.block_rows = 8 * kBlockRows;
    if (!b_in_place && p.by_chunk() && !p.a_columns && p.row_blocks() == 1) {
        p.pack_in_task = true;
        p.direct_b = false;
    }
    if (!p.direct_b && !p.pack_in_task) p.packed = gemm::scratch(b_buf, gemm::packed_floats(p.P, p.J));
}

// Work (multiply-adds or copies) below which a task is not worth a claim of its own.
constexpr int64_t kMinClaim = 32768;

// The tasks of several products in one parallel pass, ordered so that thread k's share of the
// pool (the k-th contiguous part of the tasks) holds the k-th part of every product: the rows
// (or tokens) that thread handled in the previous ops. `cost` is a task's work: with 128-bit
// vectors (WebAssembly) a tile task of a small layer is a few thousand multiply-adds, under a
// microsecond, and claiming each one from the pool costs a visible share of that; consecutive
// tasks (the same rows) are then claimed in groups. In wasm on 2 threads, Tiny's products:
// forward and dx 3-9% faster (dW the same), medians of 30 alternated rounds.
template <class Count, class Cost, class Run>
void run_interleaved(const std::vector<Product>& ps, Count count, Cost cost, Run run) {
    const int64_t T = num_threads();
    struct Segment {
        size_t product;
        int64_t first, size;
    };
    std::vector<Segment> segs;
    std::vector<int64_t> start{0};
    int64_t work = 0;
    for (int64_t k = 0; k < T; k++)
        for (size_t i = 0; i < ps.size(); i++) {
            const int64_t n = count(ps[i]), a = n * k / T, b = n * (k + 1) / T;
            if (b > a) {
                segs.push_back({i, a, b - a});
                start.push_back(start.back() + b - a);
                work += (b - a) * cost(ps[i]);
            }
        }
    const int64_t n = start.back();
    if (n == 0) return;
    // Group g consecutive tasks per claim, keeping at least 8 claims per thread.
    int64_t g = 1;
    const int64_t per_task = work / n;
    if (T > 1 && per_task < kMinClaim)
        g = std::max<int64_t>(1, std::min((kMinClaim + per_task - 1) / std::max<int64_t>(per_task, 1), n / (8 * T)));
    parallel_for((n + g - 1) / g, [&](int64_t G) {
        const int64_t t1 = std::min(n, (G + 1) * g);
        size_t s = size_t(std::upper_bound(start.begin(), start.end(), G * g) - start.begin() - 1);
        for (int64_t t = G * g; t < t1; t++) {
            while (t >= start[s + 1]) s++;
            run(ps[segs[s].product], segs[s].first + t - start[s]);
        }
    });
}

// Runs several products: one parallel pass packs every panel, a second computes every tile,
// and a third adds the partial sums of the products split over p.
void run_products(const std::vector<Product>& ps) {
    run_interleaved(ps, [](const Product& p) { return p.pack_tasks(); }, [](const Product& p) { return p.P * gemm::kCols; },
                    [](const Product& p, int64_t t) { p.pack(t); });
    run_interleaved(ps, [](const Product& p) { return p.tasks(); }, [](const Product& p) { return p.task_work(); },
                    [](const Product& p, int64_t t) { p.run(t); });
    for (const auto& p : ps)
        if (p.partial)
            parallel_ranges(p.I, grain_for(p.I, p.J * (p.chunks() - 1)), [&](int64_t r0, int64_t r1) { p.finish(r0, r1); });
}

thread_local std::vector<float> t_pack_a, t_pack_b, t_partial, t_strips, t_db;

}  // namespace

void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t M, int64_t N, int64_t K) {
    // B(k, n) = W[n, k]: packed straight from W's rows, no transposed copy.
    Product p{y, N, x, K, 1, W, 1, K, M, N, K, b ? Store::bias : Store::overwrite, b, nullptr};
    plan(p, t_pack_a);
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
        plan(p, t_pack_a);
        ps.push_back(p);
    }
    if (dW) {
        // A(n, m) = dy[m, n]: a_i = 1, so the kRows scalars of one p are adjacent in memory.
        Product p{dW, K, dy, 1, N, x, K, 1, N, K, M, acc_dW ? Store::add : Store::overwrite, nullptr, nullptr};
        plan(p, t_pack_b, &t_partial, &t_strips);
        ps.push_back(p);
    }
    if (!ps.empty()) run_products(ps);
    if (db) {
        // db[n] = sum_m dy[m, n]. Tasks of (chunk of kChunkP rows, block of kColBlock columns),
        // numbered chunk by chunk so that each thread sums the rows of dy it produced: the sum
        // of a chunk's rows, in row order, in float (vectorised across the columns), goes to the
        // chunk's partial, and each column then adds its chunks' partials in chunk order, in
        // double. The chunks are fixed, so the floats are the same whatever the thread count.
        // (Before: one task per 64 columns summing all M rows in double, a single task for
        // Tiny's 48-wide layers: in WebAssembly on 2 threads that was 0.21 of Tiny's 2.47 ms of
        // linear_backward per step, measured by leaving db out.)
        constexpr int64_t kColBlock = 64;
        const int64_t chunks = (M + kChunkP - 1) / kChunkP, blocks = (N + kColBlock - 1) / kColBlock;
        float* part = gemm::scratch(t_db, size_t(chunks * N));
        parallel_for(chunks * blocks, [&](int64_t t) {
            const int64_t c = t / blocks, n0 = t % blocks * kColBlock, n1 = std::min(N, n0 + kColBlock);
            const int64_t m1 = std::min(M, (c + 1) * kChunkP);
            float sum[kColBlock] = {};
            for (int64_t m = c * kChunkP; m < m1; m++) {
                const float* d = dy + m * N + n0;
                for (int64_t n = 0; n < n1 - n0; n++) sum[n] += d[n];
            }
            std::copy(sum, sum + (n1 - n0), part + c * N + n0);
        });
        for (int64_t n = 0; n < N; n++) {
            double s = 0.0;
            for (int64_t c = 0; c < chunks; c++) s += part[c * N + n];
            db[n] = (acc_db ? db[n] : 0.0f) + static_cast<float>(s);
        }
    }
}

}  // namespace ptl::cpu
