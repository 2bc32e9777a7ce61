// attention_probs: the attention weights themselves, for inspection ("watch the model think"):
// probs[b, h, i, j] = softmax_j(q_i . k_j * scale) over j <= i, exactly 0 for j > i, with
// scale = 1 / sqrt(C / H) (C++ twin: kernels/attention_probs.cpp; the same scores as
// attention.wgsl). q, k are [B, T, C]; probs is [B, H, T, T], rows in fp32.
// One workgroup of WG threads per (query row, batch * head); thread t handles keys t, t + WG, ...
// Three passes over the row in the output itself (scores, then exp(s - max), then times
// 1 / sum), each thread touching only its own elements; max and sum are workgroup reductions.
struct Params { T: u32, C: u32, H: u32, scale: f32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read_write> probs: array<f32>;

const HS: u32 = 16u;  // head size (replaced by the executor)
const WG: u32 = 64u;
const RED_WG: u32 = 64u;
// #include reduce
const NEG_BIG: f32 = -1.0e30;

var<workgroup> qs: array<f32, HS>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wid.x;          // query row
  let bh = wid.y;         // b * H + h
  let b = bh / U.H;
  let h = bh % U.H;
  let base = b * U.T * U.C + h * HS;  // row r of this sequence and head: base + r * C
  let row = (bh * U.T + i) * U.T;     // probs[b, h, i, :]
  for (var c = lid; c < HS; c += WG) { qs[c] = q[base + i * U.C + c]; }
  workgroupBarrier();

  var mx = NEG_BIG;
  for (var j = lid; j <= i; j += WG) {
    var d = 0.0;
    for (var c = 0u; c < HS; c++) { d = fma(qs[c], k[base + j * U.C + c], d); }
    let s = d * U.scale;
    probs[row + j] = s;
    mx = max(mx, s);
  }
  let m = wg_max(mx, lid, WG);
  var sum = 0.0;
  for (var j = lid; j <= i; j += WG) {
    let p = exp(probs[row + j] - m);
    probs[row + j] = p;
    sum += p;
  }
  let inv = 1.0 / wg_sum(sum, lid, WG);  // >= 1 term equal to exp(0)
  for (var j = lid; j < U.T; j += WG) {
    var p = 0.0;
    if (j <= i) { p = probs[row + j] * inv; }
    probs[row + j] = p;
  }
}
