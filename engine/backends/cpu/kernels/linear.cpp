// Linear layer: y = x W^T + b, with W stored [out, in] as in PyTorch.
//
// The three products of the layer go through the packed-panel micro-kernel of gemm.h, which
// computes C = A B with B in column panels of kCols floats:
//
//   forward  y  = x  W^T : C = y  [M, N], A = x    [M, K], B = W^T [K, N] (packed from W's rows)
//   backward dx = dy W   : C = dx [M, K], A = dy   [M, N], B = W   [N, K]
//   backward dW = dy^T x : C = dW [N, K], A = dy^T [N, M], B = x   [M, K]
//
// The additions that fix the floats:
// - forward and dx: every element of C is one chain of multiply-adds over all of p;
// - dW: the sum over the tokens (p) is cut into chunks of kChunkP tokens, each chunk's chain
//   starts from zero, and the chunk sums are added to dW in chunk order.
// Every plan below (how the work is cut into tasks, which thread runs which, what is copied and
// where partial sums wait) performs exactly these additions, so the results are bitwise the same
// whatever the thread count and whichever plan a shape gets: a plan is only a choice of speed.
// docs/cpu-backend.md has the measurements behind plan()'s rules.
#include <algorithm>
#include <vector>

#include "engine/backends/cpu/gemm.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/thread_pool.h"

namespace ptl::cpu {

namespace {

using gemm::Store;

// Rows of C per task: four register tiles, a few microseconds of work, so that a product has
// many more tasks than there are threads.
constexpr int64_t kBlockRows = 4 * gemm::kRows;
// Tokens per chunk of dW's sum (and of db's): the unit that threads share without changing the
// floats. kChunkP rows of a packed panel (32 KB with AVX-512) stay in L1 while a row block uses them.
constexpr int64_t kChunkP = 256;
// Per-core caches of the machine plan()'s thresholds were tuned on (AMD Zen 5): L1 data and L2.
constexpr size_t kL1Bytes = 48 << 10;
constexpr size_t kL2Bytes = size_t(1) << 20;

// How the sum over p is cut into passes and shared between tasks.
enum class Sum {
  whole,           // forward, dx: a task per tile, summing over all of p in one pass
  one_chunk,       // dW over at most kChunkP tokens: a task per tile, one pass
  chunk_by_chunk,  // dW on one thread: a task per (chunk, tile), chunk c's tasks all before chunk c + 1's,
                   // each adding its chunk to C
  partials,        // dW on several threads: a task per (chunk, tile); chunk 0 goes to C, chunk c > 0
                   // to partial c - 1, which finish() adds to C in chunk order
  chunks_in_task,  // dW on several threads where the partials would not fit in L2: a task per tile,
                   // adding every chunk to C in order
};

// Where the tasks read A from.
enum class ARead {
  in_place,      // through the strides a_i, a_p
  strips,        // dy^T whose columns are a page or more apart: a task is a whole row block (every
                 // panel), and it first copies its rows, one chunk at a time, into strips
                 // [kChunkP][kRows], one per register tile, which every panel then reads end to end
  chunk_strips,  // as strips, but a chunk's first task copies the strips of every row block at once,
                 // reading dy's rows whole (Sum::chunk_by_chunk only: one thread runs the tasks in order)
};

// Where the tasks read B from.
enum class BRead {
  packed,          // panels packed by a pass of their own, before the tasks, or before the call (a weight
                   // kept packed while it does not change: linear_forward_packed, packed_weights.h)
  in_place,        // row-major, whole panels: read through its row stride, no copy
  packed_in_task,  // each task packs its own panel of its chunk (or of all of p) into a buffer in its cache
};

// kRows floats of a strip are copied by a loop of that fixed count, which compiles to a few vector
// moves: std::copy_n of a run-time count is a call to memmove per token.
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

// One product C[i, j] (store) sum_p A(i, p) B(p, j), i < I, j < J, p < P, and its plan.
// The first fields describe the product; plan() fills the rest.
struct Product {
  float* C;
  int64_t ldc;
  const float* A;
  int64_t a_i, a_p;  // A(i, p) = A[i a_i + p a_p]
  const float* B;
  int64_t b_p, b_j;  // B(p, j) = B[p b_p + j b_j]
  int64_t I, J, P;
  Store store;
  const float* bias = nullptr;  // Store::bias: bias[j], added by the first pass over p

  Sum sum = Sum::whole;
  ARead a_read = ARead::in_place;
  BRead b_read = BRead::packed;
  // Rows of C per task. Tasks are numbered along the rows of C, a row block against one panel
  // after the other, so a row block of A stays in cache across the panels. Where B does not fit
  // in L2, every row block streams all of B from L3, so the blocks are 8 times taller: each panel
  // of B then serves 8 times the rows from L2 before the next one comes.
  int64_t block_rows = kBlockRows;
  const float* packed = nullptr;  // BRead::packed: every panel of B (given, or made by the packing pass)
  float* pack_into = nullptr;     // where the packing pass writes `packed` (null: B came packed)
  float* partial = nullptr;       // Sum::partials: chunks 1 .. of the sum, each I x ldc
  float* a_strips = nullptr;      // ARead::chunk_strips: strip s (rows s kRows ..) at s kRows kChunkP

  int64_t panels() const { return gemm::panels(J); }
  int64_t row_blocks() const { return (I + block_rows - 1) / block_rows; }
  bool a_columns() const { return a_read != ARead::in_place; }
  // Tasks per chunk of p, a chunk's tasks adding to what the earlier chunks' left.
  bool split_p() const { return sum == Sum::chunk_by_chunk || sum == Sum::partials; }
  // A task reads one chunk of B at a time.
  bool by_chunk() const { return split_p() || sum == Sum::chunks_in_task; }
  // Values of p per pass of a tile: one chain over all of p, or chunks of the sum.
  int64_t depth() const { return sum == Sum::whole ? std::max<int64_t>(P, 1) : kChunkP; }
  int64_t passes() const { return (P + depth() - 1) / depth(); }
  int64_t chunks() const { return split_p() ? passes() : 1; }
  int64_t tasks() const { return chunks() * (a_columns() ? 1 : panels()) * row_blocks(); }
  int64_t pack_tasks() const { return pack_into ? panels() : 0; }
  // Multiply-adds of one task: a row block (a_columns) or a tile, over one chunk or all of p.
  int64_t task_work() const {
    return block_rows * (a_columns() ? J : gemm::kCols) * (split_p() ? std::min(P, kChunkP) : P);
  }
  void pack(int64_t t) const { gemm::pack_b(pack_into, B, b_p, b_j, P, J, t, t + 1); }
  // Pass c of the sum: where it goes and how it is stored. Pass 0 writes C (with the bias); a
  // later one adds to C, or overwrites its own partial.
  float* pass_out(int64_t c) const { return c == 0 || !partial ? C : partial + (c - 1) * I * ldc; }
  Store pass_store(int64_t c) const { return c == 0 ? store : partial ? Store::overwrite : Store::add; }
  const float* pass_bias(int64_t c, int64_t j0) const { return c == 0 && bias ? bias + j0 : nullptr; }
  // The passes task t runs: its own chunk, or all of them in order.
  int64_t first_pass(int64_t t) const { return split_p() ? t / (tasks() / chunks()) : 0; }
  int64_t end_pass(int64_t t) const { return split_p() ? first_pass(t) + 1 : passes(); }
  // Panel q of B from row p0 on, and its row stride (null for BRead::packed_in_task).
  const float* b_panel(int64_t q, int64_t p0) const {
    if (b_read == BRead::in_place) return B + q * gemm::kCols + p0 * b_p;
    return b_read == BRead::packed ? gemm::panel(packed, P, q) + p0 * gemm::kCols : nullptr;
  }
  int64_t ldb() const { return b_read == BRead::in_place ? b_p : gemm::kCols; }

  // A task with a_columns: row block rb, its chunk (or every chunk, in order), every panel.
  void run_columns(int64_t t) const {
    static thread_local std::vector<float> strips;
    const int64_t rb = t % row_blocks(), i0 = rb * kBlockRows, rows = std::min(kBlockRows, I - i0);
    constexpr int64_t R = gemm::kRows;
    for (int64_t c = first_pass(t); c < end_pass(t); c++) {
      const int64_t p0 = c * kChunkP, np = std::min(kChunkP, P - p0);
      float* buf;
      if (a_read == ARead::chunk_strips) {
        buf = a_strips + i0 * kChunkP;
        if (rb == 0) pack_strips(p0, np);
      } else {
        buf = gemm::scratch(strips, size_t(kBlockRows * kChunkP));
        for (int64_t s0 = 0; s0 < rows; s0 += R)
          copy_strip(A + (i0 + s0) + p0 * a_p, a_p, std::min(R, rows - s0), buf + s0 * kChunkP, np);
      }
      for (int64_t q = 0; q < panels(); q++) {
        const int64_t j0 = q * gemm::kCols, cols = std::min(gemm::kCols, J - j0);
        for (int64_t s0 = 0; s0 < rows; s0 += R)
          gemm::gemm_panel(pass_out(c) + (i0 + s0) * ldc + j0, ldc, buf + s0 * kChunkP, 1, R, b_panel(q, p0), ldb(), np,
                           cols, std::min(R, rows - s0), pass_store(c), pass_bias(c, j0));
      }
    }
  }
  // Every strip of chunk [p0, p0 + np) into a_strips, reading kStripP rows of dy at a time
  // (kStripP whole rows stay in L1 while every strip takes its piece of them).
  void pack_strips(int64_t p0, int64_t np) const {
    constexpr int64_t R = gemm::kRows, kStripP = 8;
    const int64_t n_strips = (I + R - 1) / R;
    for (int64_t pb = 0; pb < np; pb += kStripP) {
      const int64_t pn = std::min(kStripP, np - pb);
      for (int64_t s = 0; s < n_strips; s++)
        copy_strip(A + s * R + (p0 + pb) * a_p, a_p, std::min(R, I - s * R), a_strips + s * R * kChunkP + pb * R, pn);
    }
  }
  // Task t: (chunk,) row block, panel, numbered along the rows of C within a chunk, so that
  // each thread (which starts on its own contiguous share of the tasks) works on the rows it
  // wrote in the previous op, still in its cache.
  void run(int64_t t) const {
    if (a_columns()) return run_columns(t);
    const int64_t tile = t % (panels() * row_blocks());
    const int64_t rb = tile / panels(), q = tile % panels(), i0 = rb * block_rows, j0 = q * gemm::kCols;
    const int64_t cols = std::min(gemm::kCols, J - j0), rows = std::min(block_rows, I - i0);
    for (int64_t c = first_pass(t); c < end_pass(t); c++) {
      const int64_t p0 = c * depth(), np = std::min(depth(), P - p0);
      const float* b = b_panel(q, p0);
      if (b_read == BRead::packed_in_task) {
        thread_local std::vector<float> chunk_panel;
        float* buf = gemm::scratch(chunk_panel, size_t(np * gemm::kCols));
        gemm::pack_panel(buf, B + p0 * b_p, b_p, b_j, np, J, q);
        b = buf;
      }
      gemm::gemm_panel(pass_out(c) + i0 * ldc + j0, ldc, A + i0 * a_i + p0 * a_p, a_i, a_p, b, ldb(), np, cols, rows,
                       pass_store(c), pass_bias(c, j0));
    }
  }
  // C += the partials, in chunk order, over rows [r0, r1) of C. Row by row, so that a row of C
  // stays in L1 while every chunk's partial is added to it.
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

// Rows a multiple of 4 KB apart map to the same cache sets.
bool aliasing(int64_t stride_floats) { return (stride_floats * 4) % 4096 == 0; }

// Chooses the plan of p (see Product) and gives its buffers their scratch: b_buf for packed
// panels, p_buf for partial sums, a_buf for chunk strips. A product given p_buf sums over the
// tokens (dW): it keeps the chunks of kChunkP, and may be split over them. A product whose B
// comes packed (p.packed set: linear_forward_packed) reads its panels from there.
void plan(Product& p, std::vector<float>& b_buf, std::vector<float>* p_buf = nullptr,
          std::vector<float>* a_buf = nullptr) {
  // dy^T read down columns: strips where its columns are 4 KB or more apart (read in place, a
  // row block's chunk of A spans more cache lines than L1 holds next to B's chunk); closer
  // columns are read in place, where the copy costs more than it saves.
  const bool a_columns = p.a_i == 1 && p.a_p * 4 >= 4096;
  if (a_columns) p.a_read = ARead::strips;
  const size_t partial_floats = size_t((p.P - 1) / kChunkP * p.I * p.ldc);
  if (!p_buf) {
    p.sum = Sum::whole;
  } else if (p.P <= kChunkP) {
    p.sum = Sum::one_chunk;
  } else if (num_threads() == 1) {
    // GotoBLAS's order: each chunk of A and B is read once and stays in L2 while its tasks
    // run; C, the smallest operand of dW, is read and written once per chunk.
    p.sum = Sum::chunk_by_chunk;
  } else if (!a_columns && partial_floats * sizeof(float) > kL2Bytes) {
    // Partials larger than L2 would make a round trip through memory: each thread reads all
    // the tokens of its panels instead.
    p.sum = Sum::chunks_in_task;
  } else {
    // Each thread sums only the tokens it produced (the rows of dy and x in its own cache);
    // only the partials, of the weights' shape, cross between cores.
    p.sum = Sum::partials;
    p.partial = gemm::scratch(*p_buf, partial_floats);
  }
  // One thread copying every strip of a chunk reads dy's rows whole, front to back; a task
  // copying its own strips reads a few floats from each of kChunkP rows a page or more apart,
  // a cache miss per row that the prefetchers (which stop at page boundaries) do not hide.
  if (p.sum == Sum::chunk_by_chunk && a_columns && a_buf) {
    p.a_read = ARead::chunk_strips;
    p.a_strips = gemm::scratch(*a_buf, size_t((p.I + gemm::kRows - 1) / gemm::kRows * gemm::kRows * kChunkP));
  }
  // B is read in place when it already is row-major with whole panels and rows less than 4 KB
  // apart (not a multiple of 4 KB: cache-set aliasing), and a panel of the rows a task sums over
  // fits in L1. Rows further apart than a page put every row of a panel on a page of its own,
  // where the hardware prefetchers do not follow; a panel that does not fit in L1 is re-read by
  // every tile of a row block from 128 bytes of each of P rows, where a packed panel is one run
  // of memory. With partials, B's rows may be further apart: each task reads its chunk of B once,
  // and a packing pass would read B in the same page-crossing order.
  const int64_t rows_of_b = p.by_chunk() ? std::min(p.P, kChunkP) : p.P;
  const bool row_major = p.b_j == 1 && p.J % gemm::kCols == 0 && !aliasing(p.b_p);
  const bool fits_l1 = size_t(rows_of_b * gemm::kCols) * sizeof(float) <= kL1Bytes;
  const bool b_in_place = row_major && p.b_p * 4 < 4096 && fits_l1;
  const bool b_direct = b_in_place || (row_major && p.sum == Sum::partials && fits_l1);
  // Tall row blocks where the B a task reads exceeds L2; from half of L2 for dW summed chunk by
  // chunk, whose C tiles pass through L2 once per chunk and evict B. Not for a product summed in
  // one pass whose row block of A is within a quarter of L2 (short rows of A): there the short
  // blocks measured faster.
  const size_t tall_from = p.sum == Sum::chunk_by_chunk || p.sum == Sum::chunks_in_task ? kL2Bytes / 2 : kL2Bytes;
  const bool short_a = p.sum == Sum::whole && size_t(kBlockRows * p.P) * sizeof(float) <= kL2Bytes / 4;
  if (!a_columns && !short_a && gemm::packed_floats(rows_of_b, p.J) * sizeof(float) > tall_from)
    p.block_rows = 8 * kBlockRows;
  // A B that must be packed, for a product split over p with a single row block: each piece of B
  // is used by exactly one task, which packs it into L1 itself, where a pass of its own would send
  // all of B through memory twice more (written packed, read back).
  // The same for a product of one row block summed in one pass (a few tokens through a layer, as
  // in sampling with the KV cache): each panel of W is packed by the one task that uses it, and
  // the weights are read from memory once per token instead of three times. (Generation keeps
  // the weights packed between tokens instead: packed_weights.h.)
  if (p.packed)
    p.b_read = BRead::packed;
  else if (!b_in_place && !a_columns && p.row_blocks() == 1 && (p.by_chunk() || p.sum == Sum::whole))
    p.b_read = BRead::packed_in_task;
  else if (b_direct)
    p.b_read = BRead::in_place;
  else
    p.packed = p.pack_into = gemm::scratch(b_buf, gemm::packed_floats(p.P, p.J));
}

// Work (multiply-adds or copies) below which a task is not worth a claim of its own.
constexpr int64_t kMinClaim = 32768;

// The tasks of several products in one parallel pass, ordered so that thread k's share of the
// pool (the k-th contiguous part of the tasks) holds the k-th part of every product: the rows
// (or tokens) that thread handled in the previous ops. Tasks under kMinClaim of `cost` (tiles of
// small layers with 128-bit vectors, under a microsecond) are claimed in groups of consecutive
// tasks, at least 8 claims per thread: a claim from the pool would be a visible share of each.
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

// Runs several products: one parallel pass packs every panel of the packed Bs, a second runs
// every task, and a third adds the partial sums of the products that have them.
void run_products(const std::vector<Product>& ps) {
  run_interleaved(
      ps, [](const Product& p) { return p.pack_tasks(); }, [](const Product& p) { return p.P * gemm::kCols; },
      [](const Product& p, int64_t t) { p.pack(t); });
  run_interleaved(
      ps, [](const Product& p) { return p.tasks(); }, [](const Product& p) { return p.task_work(); },
      [](const Product& p, int64_t t) { p.run(t); });
  for (const auto& p : ps)
    if (p.partial)
      parallel_ranges(p.I, grain_for(p.I, p.J * (p.chunks() - 1)), [&](int64_t r0, int64_t r1) { p.finish(r0, r1); });
}

thread_local std::vector<float> t_pack_a, t_pack_b, t_partial, t_strips, t_db;

// The forward product y = x W^T (+ b): B(k, n) = W[n, k], packed straight from W's rows (no
// transposed copy), or already packed (W_packed).
Product forward_product(float* y, const float* x, const float* W, const float* W_packed, const float* b, int64_t M,
                        int64_t N, int64_t K) {
  Product p{.C = y,
            .ldc = N,
            .A = x,
            .a_i = K,
            .a_p = 1,
            .B = W,
            .b_p = 1,
            .b_j = K,
            .I = M,
            .J = N,
            .P = K,
            .store = b ? Store::bias : Store::overwrite,
            .bias = b};
  p.packed = W_packed;
  plan(p, t_pack_a);
  return p;
}

}  // namespace

void linear_forward(float* y, const float* x, const float* W, const float* b, int64_t M, int64_t N, int64_t K) {
  run_products({forward_product(y, x, W, nullptr, b, M, N, K)});
}

// The panels of B(k, n) = W[n, k], as forward_product's packing pass lays them out.
size_t linear_packed_floats(int64_t N, int64_t K) { return gemm::packed_floats(K, N); }

void linear_pack_weight(float* packed, const float* W, int64_t N, int64_t K) {
  parallel_for(gemm::panels(N), [&](int64_t q) { gemm::pack_b(packed, W, 1, K, K, N, q, q + 1); });
}

void linear_forward_packed(float* y, const float* x, const float* W_packed, const float* b, int64_t M, int64_t N,
                           int64_t K) {
  // The tiles and their multiply-adds are those of linear_forward's plans: only where a tile
  // reads its panel of B from differs.
  run_products({forward_product(y, x, nullptr, W_packed, b, M, N, K)});
}

void linear_backward(float* dx, bool acc_dx, float* dW, bool acc_dW, float* db, bool acc_db, const float* dy,
                     const float* x, const float* W, int64_t M, int64_t N, int64_t K) {
  // y[m, n] = sum_k x[m, k] W[n, k] + b[n], so
  //   dx[m, k] = sum_n dy[m, n] W[n, k]   (dx = dy W)
  //   dW[n, k] = sum_m dy[m, n] x[m, k]   (dW = dy^T x)
  //   db[n]    = sum_m dy[m, n]
  // dx and dW go to the pool in one pass, their tasks interleaved (run_interleaved).
  std::vector<Product> ps;
  if (dx) {
    Product p{.C = dx,
              .ldc = K,
              .A = dy,
              .a_i = N,
              .a_p = 1,
              .B = W,
              .b_p = K,
              .b_j = 1,
              .I = M,
              .J = K,
              .P = N,
              .store = acc_dx ? Store::add : Store::overwrite};
    plan(p, t_pack_a);
    ps.push_back(p);
  }
  if (dW) {
    // A(n, m) = dy[m, n]: a_i = 1, so the kRows scalars of one p are adjacent in memory.
    Product p{.C = dW,
              .ldc = K,
              .A = dy,
              .a_i = 1,
              .a_p = N,
              .B = x,
              .b_p = K,
              .b_j = 1,
              .I = N,
              .J = K,
              .P = M,
              .store = acc_dW ? Store::add : Store::overwrite};
    plan(p, t_pack_b, &t_partial, &t_strips);
    ps.push_back(p);
  }
  if (!ps.empty()) run_products(ps);
  if (db) {
    // db[n] = sum_m dy[m, n], with the chunks of dW: tasks of (chunk of kChunkP rows, block of
    // kColBlock columns), numbered chunk by chunk so that each thread sums the rows of dy it
    // produced. A chunk's rows are summed in row order in float (vectorised across the
    // columns) into the chunk's partial; each column then adds its chunks' partials in chunk
    // order, in double.
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
