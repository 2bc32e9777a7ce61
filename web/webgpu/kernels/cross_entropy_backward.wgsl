// cross_entropy_backward: dlogits (+)= (softmax(z_i) - onehot(t_i)) * mask_i / sum(mask), with
// softmax = exp(z - lse) from the saved lse (recomputed when absent). Masked-out rows get a zero
// gradient (acc 0) or are left alone (acc 1). (C++ twin: kernels/cross_entropy.cpp)
// One workgroup of 64 threads per row; sum(mask) is reduced by every workgroup (M is small).
struct Params { M: u32, V: u32, _pad0: u32, _pad1: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<i32>;
@group(0) @binding(3) var<storage, read> lse: array<f32>;
@group(0) @binding(4) var<storage, read> mask: array<f32>;
@group(0) @binding(5) var<storage, read_write> dlogits: array<f32>;

override HAS_MASK: bool = false;
override HAS_LSE: bool = true;
override ACC: bool = false;

const RED_WG: u32 = 64u;
// #include reduce

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= U.M) { return; }
  let base = row * U.V;
  var count = f32(U.M);
  var w = 1.0;
  if (HAS_MASK) {
    var s = 0.0;
    for (var i = lid; i < U.M; i += 64u) { s += mask[i]; }
    count = wg_sum(s, lid, 64u);
    w = mask[row];
  }
  var l = 0.0;
  if (HAS_LSE) {
    l = lse[row];
  } else {
    var mx = -3.0e38;
    for (var c = lid; c < U.V; c += 64u) { mx = max(mx, logits[base + c]); }
    let m = wg_max(mx, lid, 64u);
    var s = 0.0;
    for (var c = lid; c < U.V; c += 64u) { s += exp(logits[base + c] - m); }
    l = m + log(wg_sum(s, lid, 64u));
  }
  var scale = 0.0;
  if (count != 0.0) { scale = w / count; }
  let t = u32(targets[row]);
  for (var c = lid; c < U.V; c += 64u) {
    if (scale == 0.0) {
      if (!ACC) { dlogits[base + c] = 0.0; }
      continue;
    }
    let p = exp(logits[base + c] - l);
    var g = p;
    if (c == t) { g = p - 1.0; }
    g = g * scale;
    if (ACC) { g = dlogits[base + c] + g; }
    dlogits[base + c] = g;
  }
}
