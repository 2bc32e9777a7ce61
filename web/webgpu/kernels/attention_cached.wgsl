// attention_cached: causal attention of n new queries over the KV cache (C++ twin:
// attention_cached in kernels/attention.cpp). q, y are [n, C]; k_cache, v_cache are [ctx, C];
// query i sits at absolute position pos0 + i and sees cache rows 0 .. pos0 + i (already written
// by kv_cache_write in the same run). Head h is the column slice [h*HS, (h+1)*HS). For query i:
//   s_j = q_i . k_j * scale,  y_i = sum_j exp(s_j - lse_i) v_j,  lse_i = log sum_j exp s_j.
//
// Generation runs one query at a time, so one thread per query row (attention.wgsl's layout)
// would leave all but H threads idle. Here a workgroup of WG threads owns one (query, head) and
// splits the keys: per tile of WG keys, thread t scores key t0 + t, the tile max and the
// probabilities go through workgroup memory, and thread t keeps the output columns
// t, t + WG, ... (CPT of them) with the online-softmax rescaling (running max, running sum).
// No row of scores longer than one tile exists; the tile's sums are taken in a fixed order.
struct Params { n: u32, C: u32, H: u32, scale: f32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read> v_cache: array<f32>;
@group(0) @binding(4) var<storage, read> pos0: array<i32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

const HS: u32 = 16u;   // head size (replaced by the executor)
const CPT: u32 = 1u;   // output columns per thread = ceil(HS / WG) (replaced by the executor)
const WG: u32 = 64u;   // threads = keys per tile
const RED_WG: u32 = 64u;
// #include reduce
const NEG_BIG: f32 = -1.0e30;

var<workgroup> qs: array<f32, HS>;
var<workgroup> ps: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wid.x;              // query row
  let h = wid.y;              // head
  let col = h * HS;
  let keys = u32(pos0[0]) + i + 1u;  // cache rows 0 .. pos0 + i
  for (var c = lid; c < HS; c += WG) { qs[c] = q[i * U.C + col + c]; }
  workgroupBarrier();

  var acc: array<f32, CPT>;
  for (var e = 0u; e < CPT; e++) { acc[e] = 0.0; }
  var mx = NEG_BIG;
  var sum = 0.0;
  for (var t0 = 0u; t0 < keys; t0 += WG) {
    let j = t0 + lid;
    var s = NEG_BIG;
    if (j < keys) {
      var d = 0.0;
      for (var c = 0u; c < HS; c++) { d = fma(qs[c], k_cache[j * U.C + col + c], d); }
      s = d * U.scale;
    }
    let m_new = max(mx, wg_max(s, lid, WG));
    let corr = exp(mx - m_new);  // 0 on the first tile (mx = -1e30)
    var p = 0.0;
    if (j < keys) { p = exp(s - m_new); }
    ps[lid] = p;
    workgroupBarrier();
    let nk = min(WG, keys - t0);
    var tsum = 0.0;
    for (var jj = 0u; jj < nk; jj++) { tsum += ps[jj]; }
    sum = sum * corr + tsum;
    for (var e = 0u; e < CPT; e++) {
      let c = lid + e * WG;
      if (c < HS) {
        var a = acc[e] * corr;
        for (var jj = 0u; jj < nk; jj++) { a = fma(ps[jj], v_cache[(t0 + jj) * U.C + col + c], a); }
        acc[e] = a;
      }
    }
    mx = m_new;
    workgroupBarrier();
  }
  let inv = 1.0 / sum;
  for (var e = 0u; e < CPT; e++) {
    let c = lid + e * WG;
    if (c < HS) { y[i * U.C + col + c] = acc[e] * inv; }
  }
}
