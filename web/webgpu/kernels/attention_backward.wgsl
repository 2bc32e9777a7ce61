// attention_backward: FlashAttention-2 style backward, recomputing the probabilities from the
// saved lse (C++ twin: attention_backward in kernels/attention.cpp). For query i, key j <= i:
//   p = exp(q_i . k_j * scale - lse_i),  D_i = dy_i . y_i,
//   dv_j += p dy_i,  ds = p (dy_i . v_j - D_i) scale,  dq_i += ds k_j,  dk_j += ds q_i.
// With dropout (HAS_DROPOUT): the forward's keep_ij is regenerated from dropout.seed (the same
// counter-based rule, common/dropout.wgsl) and d = keep_ij dscale:
//   dv_j += d p dy_i,  ds = p (d (dy_i . v_j) - D_i) scale   (y, hence D_i, is the dropped output).
// Two passes, each owning its output rows so that no two threads ever write the same float (no
// atomics, deterministic, no T x T buffer):
//   entry `dq_main`:   one thread per query row i; key/value rows stream through workgroup memory.
//   entry `dkdv_main`: one thread per key row j; query rows (q, dy, lse, D) stream through
//                      workgroup memory in tiles of BQT rows.
struct Params { B: u32, T: u32, C: u32, H: u32, scale: f32, threshold: u32, dscale: f32, stream: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> k: array<f32>;
@group(0) @binding(4) var<storage, read> v: array<f32>;
@group(0) @binding(5) var<storage, read> y: array<f32>;
@group(0) @binding(6) var<storage, read> lse: array<f32>;
@group(0) @binding(7) var<storage, read_write> dq: array<f32>;
@group(0) @binding(8) var<storage, read_write> dk: array<f32>;
@group(0) @binding(9) var<storage, read_write> dv: array<f32>;
@group(0) @binding(10) var<storage, read> seed: array<u32>;  // dropout.seed = {key, step}

override ACC_DQ: bool = false;
override ACC_DK: bool = false;
override ACC_DV: bool = false;
override HAS_DK: bool = true;
override HAS_DV: bool = true;
override HAS_DROPOUT: bool = false;

// #include dropout

// keep_ij dscale (1 without dropout) of probability (bh, i, j).
fn drop_factor(base: u32, bh: u32, i: u32, j: u32) -> f32 {
  if (!HAS_DROPOUT) { return 1.0; }
  if (dropout_keep(base, (bh * U.T + i) * U.T + j, U.threshold)) { return U.dscale; }
  return 0.0;
}

const HS: u32 = 16u;   // head size (replaced by the executor)
const BT: u32 = 16u;   // rows per streamed tile (replaced by the executor)
const WG: u32 = 64u;   // rows owned per workgroup, one per thread (replaced by the executor)

var<workgroup> S1: array<f32, BT * HS>;  // k tile (dq) or q tile (dkdv)
var<workgroup> S2: array<f32, BT * HS>;  // v tile (dq) or dy tile (dkdv)
var<workgroup> SL: array<f32, BT>;       // lse of the query tile (dkdv)
var<workgroup> SD: array<f32, BT>;       // D of the query tile (dkdv)

@compute @workgroup_size(WG)
fn dq_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let bh = wid.y;
  let b = bh / U.H;
  let h = bh % U.H;
  let q0 = wid.x * WG;
  let i = q0 + lid;
  let valid = i < U.T;
  let base = b * U.T * U.C + h * HS;

  var qi: array<f32, HS>;
  var dyi: array<f32, HS>;
  var acc: array<f32, HS>;
  var D = 0.0;
  var l = 0.0;
  for (var c = 0u; c < HS; c++) {
    qi[c] = 0.0; dyi[c] = 0.0; acc[c] = 0.0;
    if (valid) {
      let o = base + i * U.C + c;
      qi[c] = q[o];
      dyi[c] = dy[o];
      D = fma(dyi[c], y[o], D);
    }
  }
  if (valid) { l = lse[bh * U.T + i]; }
  var dbase = 0u;
  if (HAS_DROPOUT) { dbase = dropout_base(U.stream, seed[0], seed[1]); }

  let kv_end = min(U.T, q0 + WG);
  for (var t0 = 0u; t0 < kv_end; t0 += BT) {
    for (var e = lid; e < BT * HS; e += WG) {
      let r = t0 + e / HS;
      let c = e % HS;
      var kk = 0.0;
      var vv = 0.0;
      if (r < U.T) { kk = k[base + r * U.C + c]; vv = v[base + r * U.C + c]; }
      S1[e] = kk;
      S2[e] = vv;
    }
    workgroupBarrier();
    if (valid && t0 <= i) {
      let n = min(BT, i + 1u - t0);
      for (var jj = 0u; jj < n; jj++) {
        var s = 0.0;
        var dp = 0.0;
        for (var c = 0u; c < HS; c++) {
          s = fma(qi[c], S1[jj * HS + c], s);
          dp = fma(dyi[c], S2[jj * HS + c], dp);
        }
        let p = exp(s * U.scale - l);
        let ds = p * (drop_factor(dbase, bh, i, t0 + jj) * dp - D) * U.scale;
        for (var c = 0u; c < HS; c++) { acc[c] = fma(ds, S1[jj * HS + c], acc[c]); }
      }
    }
    workgroupBarrier();
  }
  if (valid) {
    for (var c = 0u; c < HS; c++) {
      let o = base + i * U.C + c;
      var val = acc[c];
      if (ACC_DQ) { val = dq[o] + val; }
      dq[o] = val;
    }
  }
}

@compute @workgroup_size(WG)
fn dkdv_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let bh = wid.y;
  let b = bh / U.H;
  let h = bh % U.H;
  let j0 = wid.x * WG;
  let j = j0 + lid;
  let valid = j < U.T;
  let base = b * U.T * U.C + h * HS;

  var kj: array<f32, HS>;
  var vj: array<f32, HS>;
  var dka: array<f32, HS>;
  var dva: array<f32, HS>;
  for (var c = 0u; c < HS; c++) {
    kj[c] = 0.0; vj[c] = 0.0; dka[c] = 0.0; dva[c] = 0.0;
    if (valid) { kj[c] = k[base + j * U.C + c]; vj[c] = v[base + j * U.C + c]; }
  }

  var dbase = 0u;
  if (HAS_DROPOUT) { dbase = dropout_base(U.stream, seed[0], seed[1]); }

  // Causal: only queries i >= j contribute, so the block starts at its first key row.
  for (var t0 = j0; t0 < U.T; t0 += BT) {
    for (var e = lid; e < BT * HS; e += WG) {
      let r = t0 + e / HS;
      let c = e % HS;
      var qq = 0.0;
      var gg = 0.0;
      if (r < U.T) { qq = q[base + r * U.C + c]; gg = dy[base + r * U.C + c]; }
      S1[e] = qq;
      S2[e] = gg;
    }
    for (var lr = lid; lr < BT; lr += WG) {
      let r = t0 + lr;
      var D = 0.0;
      var l = 0.0;
      if (r < U.T) {
        for (var c = 0u; c < HS; c++) { D = fma(dy[base + r * U.C + c], y[base + r * U.C + c], D); }
        l = lse[bh * U.T + r];
      }
      SD[lr] = D;
      SL[lr] = l;
    }
    workgroupBarrier();
    if (valid && t0 + BT > j) {
      for (var ii = 0u; ii < BT; ii++) {
        let i = t0 + ii;
        if (i < j || i >= U.T) { continue; }
        var s = 0.0;
        var dp = 0.0;
        for (var c = 0u; c < HS; c++) {
          s = fma(S1[ii * HS + c], kj[c], s);
          dp = fma(S2[ii * HS + c], vj[c], dp);
        }
        let p = exp(s * U.scale - SL[ii]);
        let d = drop_factor(dbase, bh, i, j);
        let ds = p * (d * dp - SD[ii]) * U.scale;
        let pd = d * p;
        for (var c = 0u; c < HS; c++) {
          dva[c] = fma(pd, S2[ii * HS + c], dva[c]);
          dka[c] = fma(ds, S1[ii * HS + c], dka[c]);
        }
      }
    }
    workgroupBarrier();
  }
  if (valid) {
    for (var c = 0u; c < HS; c++) {
      let o = base + j * U.C + c;
      if (HAS_DK) { var val = dka[c]; if (ACC_DK) { val = dk[o] + val; } dk[o] = val; }
      if (HAS_DV) { var val = dva[c]; if (ACC_DV) { val = dv[o] + val; } dv[o] = val; }
    }
  }
}
