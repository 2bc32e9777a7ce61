// cross_entropy: loss = sum_i mask_i (lse_i - logits[i, targets_i]) / sum_i mask_i, lse saved per
// row (C++ twin: kernels/cross_entropy.cpp; mask absent = all ones; rows with mask 0 are skipped).
//   entry `rows_main`:  one workgroup per row: max, sum of exp(z - max), lse, the row's weighted loss
//                       into a scratch buffer;
//   entry `total_main`: one workgroup adds the row losses (and the mask) in a fixed order.
struct Params { M: u32, V: u32, _pad0: u32, _pad1: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> targets: array<i32>;
@group(0) @binding(3) var<storage, read> mask: array<f32>;
@group(0) @binding(4) var<storage, read_write> lse: array<f32>;
@group(0) @binding(5) var<storage, read_write> rowloss: array<f32>;
@group(0) @binding(6) var<storage, read_write> loss: array<f32>;

override HAS_MASK: bool = false;
override HAS_LSE: bool = true;

var<workgroup> red: array<f32, 256>;

@compute @workgroup_size(64)
fn rows_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= U.M) { return; }
  let base = row * U.V;
  var mx = -3.0e38;
  for (var c = lid; c < U.V; c += 64u) { mx = max(mx, logits[base + c]); }
  red[lid] = mx;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  let m = red[0];
  workgroupBarrier();
  var sum = 0.0;
  for (var c = lid; c < U.V; c += 64u) { sum += exp(logits[base + c] - m); }
  red[lid] = sum;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  if (lid == 0u) {
    let l = m + log(red[0]);
    if (HAS_LSE) { lse[row] = l; }
    var w = 1.0;
    if (HAS_MASK) { w = mask[row]; }
    var contrib = 0.0;
    if (w != 0.0) { contrib = w * (l - logits[base + u32(targets[row])]); }
    rowloss[row] = contrib;
  }
}

@compute @workgroup_size(256)
fn total_main(@builtin(local_invocation_index) lid: u32) {
  var s = 0.0;
  var cnt = 0.0;
  for (var i = lid; i < U.M; i += 256u) {
    s += rowloss[i];
    if (HAS_MASK) { cnt += mask[i]; }
  }
  red[lid] = s;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (lid < h) { red[lid] += red[lid + h]; }
    workgroupBarrier();
  }
  let total = red[0];
  workgroupBarrier();
  red[lid] = cnt;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (lid < h) { red[lid] += red[lid + h]; }
    workgroupBarrier();
  }
  if (lid == 0u) {
    var count = f32(U.M);
    if (HAS_MASK) { count = red[0]; }
    var r = 0.0;
    if (count != 0.0) { r = total / count; }
    loss[0] = r;
  }
}
