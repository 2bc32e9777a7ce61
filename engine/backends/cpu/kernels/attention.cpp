// Causal multi-head self-attention, FlashAttention style: no B x H x T x T tensor is ever stored.
//
// Head h of a row of q, k, v, y is the column slice [h*hs, (h+1)*hs), hs = C / H. For a query
// row i (one head) and the keys j <= i:
//   s_j = q_i . k_j / sqrt(hs),   p_j = exp(s_j - lse_i),   lse_i = log sum_j exp s_j,
//   y_i = sum_j p_j v_j.
// The forward keeps only lse_i (one float per row and head); the backward recomputes p_j from
// it, which costs a second q . k product but saves the B*H*T*T probabilities.
//
// Work is split into one task per (sequence, head): tasks write disjoint column slices of y,
// dq, dk, dv, so they need no locks, and each task computes its outputs in the same order
// whatever thread runs it. Inside a task, query rows are taken in blocks of kQB; a block's
// scores against the keys it can see are a small matrix product (kQB x n, n <= T: 96 KB of
// scratch per thread at T = 256), computed with the register-blocked kernel of gemm.h tile by
// tile of rows, each tile only against the keys its rows can see, and the softmax runs
// vectorised along the block's rows. Memory grows linearly with T (for a fixed block height).
//
// Dropout on the probabilities (training only) multiplies p_j by its mask factor (1 / (1 - p)
// or 0) after the softmax, so lse and the softmax are those of the undropped scores; the mask
// is a hash of the element's index (engine/dropout.h), so the backward draws it again from the
// same index instead of storing B*H*T*T flags.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/backends/cpu/gemm.h"
#include "engine/backends/cpu/kernels.h"
#include "engine/backends/cpu/simd.h"
#include "engine/backends/cpu/thread_pool.h"

namespace ptl::cpu {

namespace {

using gemm::Store;
using simd::kW;
using simd::vf;
using simd::vi;

// Register tiles of rows: each tile of a block is multiplied only against the keys its own last
// row can see (see tile_keys), so the causal triangle costs less than a tile per block.
constexpr int64_t kTile = gemm::kRows;
// Query rows per block: 8 register tiles (96 rows with AVX-512, 32 in WebAssembly). Blocks make
// the scores a matrix product, and dK, dV are summed over a block's rows in one product, then
// added to the earlier blocks' sums. With the causal triangle cut per tile, taller blocks cost
// no extra multiply-adds and add to dK and dV fewer times. The block height decides where dK's
// and dV's sums over query rows are split, so it is part of the results: changing it moves dK
// and dV in the last bits (the cut per tile does not).
constexpr int64_t kQB = 8 * kTile;

float head_scale(int64_t hs) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs))); }

vi lane_index() {
  vi v;
  for (int l = 0; l < kW; l++) v[l] = l;
  return v;
}

// Per-thread scratch, grown on demand and reused by every task this thread runs.
struct Scratch {
  std::vector<float> kt, vp, kp, vt, s, dp, a, b, m;
  static float* get(std::vector<float>& v, size_t n) { return gemm::scratch(v, n); }
};
thread_local Scratch t_scratch;

// The scores' row stride for n keys: whole vectors, so the softmax loops need no tail.
int64_t row_stride(int64_t n) { return (n + kW - 1) / kW * kW; }
// The part of such a row that the query at position pos sees (keys 0 .. pos), in whole vectors.
int64_t visible_stride(int64_t n, int64_t pos) { return row_stride(std::min(n, pos + 1)); }

// The keys seen by a tile of query rows whose last row is at position `last`: 0 .. last. Its
// scores are computed over whole vectors of them (the softmax reads those, and the padding's
// keys are real keys or the packed panels' zeros), at most `lds` (the block's row stride).
int64_t tile_keys(int64_t last) { return last + 1; }
int64_t tile_cols(int64_t last, int64_t lds) { return std::min(lds, row_stride(tile_keys(last))); }

// A B operand with one row per key (or query) and hs columns: one head's slice of rows of v, k,
// dy or q, C floats apart. The micro-kernel reads panel j of it at base + j panel_step, its rows
// ldb floats apart. Read in place (no copy) where that is safe and cheap: hs whole panels (every
// row of a panel is then kCols floats that can be read), at most 16 KB of panel rows (a tile
// rereads them all, so they must stay in L1), and rows not a multiple of 1 KB apart (such rows
// fall into a quarter of L1's sets or fewer and evict each other). Otherwise packed first.
// Packing such an operand would only copy it.
struct RowsB {
  const float* base;
  int64_t ldb, panel_step;
  const float* panel(int64_t j, int64_t p0) const { return base + j * panel_step + p0 * ldb; }
};
// A B operand packed by gemm::pack_b with P rows (kᵀ or vᵀ: P = hs).
RowsB packed_b(const float* packed, int64_t P) {
  return {.base = packed, .ldb = gemm::kCols, .panel_step = P * gemm::kCols};
}

RowsB rows_b(const float* src, int64_t C, int64_t rows, int64_t hs, std::vector<float>& buf) {
  const bool fits_l1 = size_t(rows * gemm::kCols) * sizeof(float) <= (16 << 10);
  if (hs % gemm::kCols == 0 && fits_l1 && (C * 4) % 1024 != 0)
    return {.base = src, .ldb = C, .panel_step = gemm::kCols};
  float* packed = Scratch::get(buf, gemm::packed_floats(rows, hs));
  gemm::pack_b(packed, src, C, 1, rows, hs);
  return packed_b(packed, rows);
}

// C (I x J) = A B, summing over rows p0 .. p0 + P of B.
void gemm_rows(float* C, int64_t ldc, const float* A, int64_t a_i, int64_t a_p, const RowsB& b, int64_t p0, int64_t P,
               int64_t I, int64_t J, Store store) {
  for (int64_t j = 0; j < gemm::panels(J); j++) {
    const int64_t j0 = j * gemm::kCols;
    gemm::gemm_panel(C + j0, ldc, A, a_i, a_p, b.panel(j, p0), b.ldb, P, std::min(gemm::kCols, J - j0), I, store);
  }
}

// C (rows x cols, ldc) = A B over tiles of kTile rows, tile t summing over p < tile_keys(its last
// position) only: the rows of A are probabilities (or dS) that are 0 past a row's visible keys,
// so the terms left out are exact zeros, and every C element is the same chain of multiply-adds
// as over all of P. pos_first is the position of row 0.
void gemm_causal_p(float* C, int64_t ldc, const float* A, int64_t lda, const RowsB& b, int64_t pos_first, int64_t rows,
                   int64_t cols, Store store) {
  for (int64_t a = 0; a < rows; a += kTile) {
    const int64_t r = std::min(kTile, rows - a);
    gemm_rows(C + a * ldc, ldc, A + a * lda, lda, 1, b, 0, tile_keys(pos_first + a + r - 1), r, cols, store);
  }
}

// S (rows x ..., lds) = Q K^T for query rows at positions pos_first, pos_first + 1, ...: each tile
// of kTile rows against the keys its last row sees (tile_cols). Columns past that stay unwritten;
// the softmax never reads them and zeroes the rest of every row.
void scores(float* s, int64_t lds, const float* q, int64_t ldq, const float* kt, int64_t hs, int64_t pos_first,
            int64_t rows) {
  const RowsB b = packed_b(kt, hs);
  for (int64_t a = 0; a < rows; a += kTile) {
    const int64_t r = std::min(kTile, rows - a);
    gemm_rows(s + a * lds, lds, q + a * ldq, ldq, 1, b, 0, hs, r, tile_cols(pos_first + a + r - 1, lds),
              Store::overwrite);
  }
}

// Softmax of one row of raw scores s[0, n) (unscaled q . k) for the query at position `pos`:
// keys j > pos are masked. Writes p_j = exp(scale s_j - lse) (0 where masked) over the whole
// padded row and returns lse. Vectorised along j; lanes are combined in a fixed order.
// Only the vectors that hold a visible key are computed; the rest of the row is set to 0, as
// the mask would have made it, so a block's early rows skip the exps of its causal triangle.
float softmax_row(float* s, int64_t n, int64_t pos, float scale) {
  const vi iota = lane_index();
  const vf neg_inf = simd::splat(-std::numeric_limits<float>::infinity());
  const int64_t n_pad = visible_stride(n, pos);
  for (int64_t j = n_pad; j < row_stride(n); j += kW) simd::store(s + j, vf{});
  vf mx = neg_inf;
  for (int64_t j = 0; j < n_pad; j += kW) {
    const vi visible = (iota + int32_t(j)) <= int32_t(pos);
    mx = simd::vmax(mx, simd::select(visible, simd::load(s + j), neg_inf));
  }
  const float m = simd::hmax(mx) * scale;
  vf sum = vf{};
  for (int64_t j = 0; j < n_pad; j += kW) {
    const vi visible = (iota + int32_t(j)) <= int32_t(pos);
    const vf p = simd::select(visible, simd::exp(simd::load(s + j) * scale - m), vf{});
    simd::store(s + j, p);
    sum += p;
  }
  const float total = simd::hsum(sum);  // >= 1: the max term is exp(0)
  const float inv = 1.0f / total;
  for (int64_t j = 0; j < n_pad; j += kW) simd::store(s + j, simd::load(s + j) * inv);
  return m + std::log(total);
}

// The dropout mask of one head's probabilities: element (i, j) of a T x T map whose first row
// is row `row0` of the B*H*T rows (flat index (row0 + i) T + j, in u32 arithmetic as every
// backend computes it).
struct ProbsMask {
  const dropout::Mask* mask = nullptr;  // null: no dropout
  uint32_t row0 = 0, T = 0;
  uint32_t index(int64_t i, int64_t j) const { return (row0 + uint32_t(i)) * T + uint32_t(j); }
  // factor[j] = the mask factor of (i, j) for keys j < n, 0 for the rest of the `stride` floats.
  void row(float* factor, int64_t i, int64_t n, int64_t stride) const {
    for (int64_t j = 0; j < n; j++) factor[j] = mask->factor(index(i, j));
    for (int64_t j = n; j < stride; j++) factor[j] = 0.0f;
  }
};

// One head of attention for `rows` consecutive queries at positions pos0, pos0 + 1, ... against
// keys 0 .. pos0 + rows - 1, whose k^T is already packed (kt: P = hs, J = keys) and whose v is
// the B operand vb. q and y rows are ld floats apart; lse (if given) gets one float per query.
// With drop.mask set, each row's probabilities are dropped after its softmax.
void attend(float* y, float* lse, const float* q, int64_t ld, const float* kt, const RowsB& vb, int64_t pos0,
            int64_t rows, int64_t hs, float scale, const ProbsMask& drop = {}) {
  Scratch& sc = t_scratch;
  for (int64_t r0 = 0; r0 < rows; r0 += kQB) {
    const int64_t qb = std::min(kQB, rows - r0);
    const int64_t n = pos0 + r0 + qb;  // keys visible to the block's last row
    const int64_t lds = row_stride(n);
    float* s = Scratch::get(sc.s, size_t(qb * lds));
    // s = q k^T for the block (the causal triangle within a tile is masked in the softmax,
    // which also zeroes each row past its visible keys).
    scores(s, lds, q + r0 * ld, ld, kt, hs, pos0 + r0, qb);
    for (int64_t r = 0; r < qb; r++) {
      const int64_t pos = pos0 + r0 + r;
      const float l = softmax_row(s + r * lds, n, pos, scale);
      if (lse) lse[r0 + r] = l;
      if (drop.mask) {
        float* sr = s + r * lds;
        for (int64_t j = 0; j <= pos; j++) sr[j] *= drop.mask->factor(drop.index(pos, j));
      }
    }
    // y = p v for the block (masked p are 0).
    gemm_causal_p(y + r0 * ld, ld, s, lds, vb, pos0 + r0, qb, hs, Store::overwrite);
  }
}

}  // namespace

void attention_forward(float* y, float* lse, const float* q, const float* k, const float* v, int64_t B, int64_t T,
                       int64_t C, int64_t H, const dropout::Mask& mask) {
  const int64_t hs = C / H;
  const float scale = head_scale(hs);
  parallel_for(B * H, [&](int64_t task) {
    const int64_t b = task / H, h = task % H;
    const int64_t col = b * T * C + h * hs;  // row 0 of this sequence, this head
    Scratch& sc = t_scratch;
    // B operands of the two products: k^T (P = hs, J = T) and v (P = T, J = hs).
    float* kt = Scratch::get(sc.kt, gemm::packed_floats(hs, T));
    gemm::pack_b(kt, k + col, 1, C, hs, T);
    const RowsB vb = rows_b(v + col, C, T, hs, sc.vp);
    const ProbsMask drop{mask.on() ? &mask : nullptr, uint32_t(task) * uint32_t(T), uint32_t(T)};
    attend(y + col, lse ? lse + task * T : nullptr, q + col, C, kt, vb, 0, T, hs, scale, drop);
  });
}

void attention_backward(float* dq, bool acc_dq, float* dk, bool acc_dk, float* dv, bool acc_dv, const float* dy,
                        const float* q, const float* k, const float* v, const float* y, const float* lse, int64_t B,
                        int64_t T, int64_t C, int64_t H, const dropout::Mask& mask) {
  // For one query row i with p_j = softmax_j(s), y_i = sum_j p_j v_j:
  //   dv_j += p_j dy_i
  //   dp_j  = dy_i . v_j
  //   ds_j  = p_j (dp_j - D_i),  D_i = sum_j p_j dp_j = dy_i . y_i   (softmax backward)
  //   dq_i += scale ds_j k_j,    dk_j += scale ds_j q_i             (s_j = scale q_i . k_j)
  // D_i is computed from y instead of summing over j first. Per block of query rows, as
  // matrices: P = exp(scale Q K^T - lse), dP = dY V^T, dS = scale P o (dP - D),
  // dV += P^T dY, dQ = dS K, dK += dS^T Q.
  // With dropout factors m_j (scale or 0) y_i = sum_j m_j p_j v_j, so dv_j += m_j p_j dy_i and
  // ds_j = p_j (m_j dp_j - D_i); D_i = dy_i . y_i still equals sum_j m_j p_j dp_j.
  if (!dq && !dk && !dv) return;
  const int64_t hs = C / H;
  const float scale = head_scale(hs);
  parallel_for(B * H, [&](int64_t task) {
    const int64_t b = task / H, h = task % H;
    const int64_t col = b * T * C + h * hs;
    const float* lse_h = lse + task * T;
    Scratch& sc = t_scratch;
    float* kt = Scratch::get(sc.kt, gemm::packed_floats(hs, T));  // k^T: scores
    float* vt = Scratch::get(sc.vt, gemm::packed_floats(hs, T));  // v^T: dP = dY V^T
    gemm::pack_b(kt, k + col, 1, C, hs, T);
    gemm::pack_b(vt, v + col, 1, C, hs, T);
    const RowsB kb = rows_b(k + col, C, T, hs, sc.kp);  // k: dQ = dS K
    const ProbsMask drop{mask.on() ? &mask : nullptr, uint32_t(task) * uint32_t(T), uint32_t(T)};
    for (int64_t i0 = 0; i0 < T; i0 += kQB) {
      const int64_t qb = std::min(kQB, T - i0), n = i0 + qb;
      const int64_t lds = row_stride(n);
      float* s = Scratch::get(sc.s, size_t(qb * lds));
      float* dp = Scratch::get(sc.dp, size_t(qb * lds));
      const float* qi = q + col + i0 * C;
      const float* dyi = dy + col + i0 * C;
      scores(s, lds, qi, C, kt, hs, i0, qb);    // S = Q K^T
      scores(dp, lds, dyi, C, vt, hs, i0, qb);  // dP = dY V^T
      const vi iota = lane_index();
      for (int64_t r = 0; r < qb; r++) {
        const int64_t i = i0 + r;
        // D_i = dy_i . y_i, in kW lanes plus a tail, lanes added in a fixed order.
        const float* yr = y + col + i * C;
        const float* dyr = dyi + r * C;
        vf dacc = vf{};
        int64_t c = 0;
        for (; c + kW <= hs; c += kW) dacc += simd::load(dyr + c) * simd::load(yr + c);
        float D = 0.0f;
        for (; c < hs; c++) D += dyr[c] * yr[c];
        D += simd::hsum(dacc);
        const float l = lse_h[i];
        float* sr = s + r * lds;
        float* dpr = dp + r * lds;
        // Past the keys row i sees, P and dS are 0 (as in softmax_row).
        const int64_t seen = visible_stride(n, i);
        for (int64_t j = seen; j < lds; j += kW) {
          simd::store(sr + j, vf{});
          simd::store(dpr + j, vf{});
        }
        if (drop.mask) {
          float* m = Scratch::get(sc.m, size_t(seen));
          drop.row(m, i, i + 1, seen);
          for (int64_t j = 0; j < seen; j += kW) {
            const vi visible = (iota + int32_t(j)) <= int32_t(i);
            const vf p = simd::select(visible, simd::exp(simd::load(sr + j) * scale - l), vf{});
            const vf f = simd::load(m + j);
            simd::store(sr + j, p * f);                                       // P, dropped
            simd::store(dpr + j, p * (simd::load(dpr + j) * f - D) * scale);  // dS
          }
          continue;
        }
        for (int64_t j = 0; j < seen; j += kW) {
          const vi visible = (iota + int32_t(j)) <= int32_t(i);
          const vf p = simd::select(visible, simd::exp(simd::load(sr + j) * scale - l), vf{});
          simd::store(sr + j, p);                                       // P
          simd::store(dpr + j, p * (simd::load(dpr + j) - D) * scale);  // dS
        }
      }
      // dQ (rows i0..i0+qb) = dS K: every query row belongs to one block, so it is written
      // once (or added to the caller's gradient).
      const Store fresh = acc_dq ? Store::add : Store::overwrite;
      if (dq) gemm_causal_p(dq + col + i0 * C, C, dp, lds, kb, i0, qb, hs, fresh);
      // dV (rows 0..n) += P^T dY and dK += dS^T Q, summed over this block's rows
      // (A(j, r) = P[r, j]: a_i = 1, a_p = lds), blocks in order. Key rows i0..n are first
      // reached by this block: written (or added to the caller's gradient); rows 0..i0
      // add to what the earlier blocks wrote. So no gradient needs zeroing first.
      // Key j of the block is seen by its query rows r >= j - i0 only, so a tile of keys
      // starting at j0 sums over r >= j0 - i0: the rows left out hold exact zeros for it.
      auto key_grad = [&](float* d, bool acc, const float* a, const float* src, std::vector<float>& buf) {
        if (!d) return;
        const RowsB b = rows_b(src, C, qb, hs, buf);
        if (i0 > 0) gemm_rows(d + col, C, a, 1, lds, b, 0, qb, i0, hs, Store::add);
        for (int64_t j0 = 0; j0 < qb; j0 += kTile) {  // key rows i0 + j0 .., query rows j0 ..
          const int64_t r = std::min(kTile, qb - j0);
          gemm_rows(d + col + (i0 + j0) * C, C, a + i0 + j0 + j0 * lds, 1, lds, b, j0, qb - j0, r, hs,
                    acc ? Store::add : Store::overwrite);
        }
      };
      key_grad(dv, acc_dv, s, dyi, sc.a);
      key_grad(dk, acc_dk, dp, qi, sc.b);
    }
  });
}

void kv_cache_write(float* k_cache, float* v_cache, const float* k, const float* v, int64_t n, int64_t C,
                    int64_t pos0) {
  std::copy(k, k + n * C, k_cache + pos0 * C);
  std::copy(v, v + n * C, v_cache + pos0 * C);
}

void attention_cached(float* y, const float* q, const float* k_cache, const float* v_cache, int64_t n, int64_t C,
                      int64_t H, int64_t pos0) {
  // The same attend() as the training forward, over the cache instead of the batch: every
  // score is the same chain of multiply-adds and masked keys add exact zeros, so the
  // generated tokens see exactly the numbers a full forward pass would compute. Cache rows
  // past pos0 + n - 1 are never read.
  const int64_t hs = C / H, keys = pos0 + n;
  const float scale = head_scale(hs);
  parallel_for(H, [&](int64_t h) {
    Scratch& sc = t_scratch;
    float* kt = Scratch::get(sc.kt, gemm::packed_floats(hs, keys));
    gemm::pack_b(kt, k_cache + h * hs, 1, C, hs, keys);
    const RowsB vb = rows_b(v_cache + h * hs, C, keys, hs, sc.vp);
    attend(y + h * hs, nullptr, q + h * hs, C, kt, vb, pos0, n, hs, scale);
  });
}

}  // namespace ptl::cpu
