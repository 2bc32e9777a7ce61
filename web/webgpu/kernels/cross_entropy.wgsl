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

const RED_WG: u32 = 256u;  // rows_main reduces over its 64 threads, total_main over 256
// #include reduce

@compute @workgroup_size(64)
fn rows_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= U.M) { return; }
  let base = row * U.V;
  var mx = -3.0e38;
  for (var c = lid; c < U.V; c += 64u) { mx = max(mx, logits[base + c]); }
  let m = wg_max(mx, lid, 64u);
  var sum = 0.0;
  for (var c = lid; c < U.V; c += 64u) { sum += exp(logits[base + c] - m); }
  let total = wg_sum(sum, lid, 64u);
  if (lid == 0u) {
    let l = m + log(total);
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
  let total = wg_sum(s, lid, 256u);
  let counted = wg_sum(cnt, lid, 256u);
  if (lid == 0u) {
    var count = f32(U.M);
    if (HAS_MASK) { count = counted; }
    var r = 0.0;
    if (count != 0.0) { r = total / count; }
    loss[0] = r;
  }
}
