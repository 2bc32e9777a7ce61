// attention: causal multi-head self-attention, FlashAttention-2 forward (C++ twin: kernels/attention.cpp).
// q, k, v, y are [B, T, C]; head h is the column slice [h*HS, (h+1)*HS). For query row i:
//   s_j = q_i . k_j * scale (j <= i),  lse_i = log sum_j exp s_j,  y_i = sum_j exp(s_j - lse_i) v_j.
// A workgroup owns BQ (64 or 32) query rows of one (batch, head), one row per thread, with its q row and
// output accumulator in registers. Keys and values stream through workgroup memory in tiles of
// BKV rows; each thread keeps the online-softmax state (running max, running sum, rescaled
// accumulator). No T x T matrix exists anywhere; only lse [B, H, T] is saved for the backward.
// HS (head size) and BKV are compile-time constants the executor substitutes per pipeline.
// Dropout on the probabilities (HAS_DROPOUT, train programs): y_i = sum_j keep_ij dscale P_ij v_j
// with lse still that of the undropped softmax; keep_ij comes from the counter-based rule
// (common/dropout.wgsl, index ((b H + h) T + i) T + j), so the backward regenerates it.
struct Params { B: u32, T: u32, C: u32, H: u32, scale: f32, threshold: u32, dscale: f32, stream: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;
@group(0) @binding(6) var<storage, read> seed: array<u32>;  // dropout.seed = {key, step}

override HAS_LSE: bool = true;
override HAS_DROPOUT: bool = false;

// #include dropout

const HS: u32 = 16u;   // head size (replaced by the executor)
const BKV: u32 = 16u;  // key/value rows per tile (replaced by the executor)
const BQ: u32 = 64u;   // query rows per workgroup = threads (replaced by the executor)
const NEG_BIG: f32 = -1.0e30;

var<workgroup> Ks: array<f32, BKV * HS>;
var<workgroup> Vs: array<f32, BKV * HS>;

@compute @workgroup_size(BQ)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let bh = wid.y;
  let b = bh / U.H;
  let h = bh % U.H;
  let q0 = wid.x * BQ;
  let i = q0 + lid;
  let valid = i < U.T;
  let base = b * U.T * U.C + h * HS;  // row r of this sequence and head: base + r * C

  var qi: array<f32, HS>;
  var acc: array<f32, HS>;
  for (var c = 0u; c < HS; c++) {
    acc[c] = 0.0;
    qi[c] = 0.0;
    if (valid) { qi[c] = q[base + i * U.C + c]; }
  }
  var mx = NEG_BIG;
  var sum = 0.0;
  var dbase = 0u;
  if (HAS_DROPOUT) { dbase = dropout_base(U.stream, seed[0], seed[1]); }
  let row = (bh * U.T + i) * U.T;  // flat index of (b, h, i, 0) in the [B, H, T, T] probabilities

  let kv_end = min(U.T, q0 + BQ);  // causal: this block never looks past its last row
  for (var t0 = 0u; t0 < kv_end; t0 += BKV) {
    for (var e = lid; e < BKV * HS; e += BQ) {
      let r = t0 + e / HS;
      let c = e % HS;
      var kk = 0.0;
      var vv = 0.0;
      if (r < U.T) {
        kk = k[base + r * U.C + c];
        vv = v[base + r * U.C + c];
      }
      Ks[e] = kk;
      Vs[e] = vv;
    }
    workgroupBarrier();
    if (valid && t0 <= i) {
      var s: array<f32, BKV>;
      var tmax = mx;
      let n = min(BKV, i + 1u - t0);  // keys t0 .. min(i, t0+BKV-1)
      for (var jj = 0u; jj < n; jj++) {
        var d = 0.0;
        for (var c = 0u; c < HS; c++) { d = fma(qi[c], Ks[jj * HS + c], d); }
        s[jj] = d * U.scale;
        tmax = max(tmax, s[jj]);
      }
      if (tmax > mx) {
        let corr = exp(mx - tmax);  // 0 on the first tile (mx = -1e30)
        sum *= corr;
        for (var c = 0u; c < HS; c++) { acc[c] *= corr; }
        mx = tmax;
      }
      for (var jj = 0u; jj < n; jj++) {
        let p = exp(s[jj] - mx);
        sum += p;
        var pv = p;
        if (HAS_DROPOUT) {
          pv = 0.0;
          if (dropout_keep(dbase, row + t0 + jj, U.threshold)) { pv = p * U.dscale; }
        }
        for (var c = 0u; c < HS; c++) { acc[c] = fma(pv, Vs[jj * HS + c], acc[c]); }
      }
    }
    workgroupBarrier();
  }
  if (valid) {
    let inv = 1.0 / sum;
    for (var c = 0u; c < HS; c++) { y[base + i * U.C + c] = acc[c] * inv; }
    if (HAS_LSE) { lse[bh * U.T + i] = mx + log(sum); }
  }
}
