// cross_entropy_tied: the tied output projection and the cross-entropy over chunks of the
// vocabulary, never holding the [M, V] logits (C++ twin: kernels/cross_entropy_tied.cpp):
//   loss = sum_i mask_i (lse_i - z[i, t_i]) / sum_i mask_i,   z = x W^T,   lse_i = log sum_v exp z[i, v].
// For each chunk of n vocabulary rows from v0 on, the executor computes z_c = x W_c^T [M, n] with
// the matrix-product kernels into a scratch buffer, then runs
//   entry `chunk_main`: one workgroup per row folds the chunk into the row's running maximum m and
//                       sum s (the online log-sum-exp: s' = s exp(m - m') + sum_v exp(z_c - m'))
//                       and keeps the target's logit if the target lies in the chunk; after the
//                       last chunk it writes lse and the row's weighted loss.
// cross_entropy.wgsl's `total_main` then averages the row losses. Rows with mask 0 never read their
// target (a placeholder there may lie outside the vocabulary).
struct Params { M: u32, n: u32, v0: u32, flags: u32 }  // flags: 1 = first chunk, 2 = last chunk
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> z: array<f32>;  // this chunk's logits [M, n]
@group(0) @binding(2) var<storage, read> targets: array<i32>;
@group(0) @binding(3) var<storage, read> mask: array<f32>;
@group(0) @binding(4) var<storage, read_write> lse: array<f32>;
@group(0) @binding(5) var<storage, read_write> rowloss: array<f32>;
@group(0) @binding(6) var<storage, read_write> state: array<f32>;  // [3 M]: running max, sum, target logit

override HAS_MASK: bool = false;
override HAS_LSE: bool = true;

const RED_WG: u32 = 64u;
// #include reduce

@compute @workgroup_size(64)
fn chunk_main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= U.M) { return; }
  let base = row * U.n;
  let first = (U.flags & 1u) != 0u;
  var mx = -3.0e38;
  for (var c = lid; c < U.n; c += 64u) { mx = max(mx, z[base + c]); }
  var m = wg_max(mx, lid, 64u);
  if (!first) { m = max(m, state[row]); }
  var s = 0.0;
  for (var c = lid; c < U.n; c += 64u) { s += exp(z[base + c] - m); }
  let chunk_sum = wg_sum(s, lid, 64u);
  if (lid == 0u) {
    var sum = chunk_sum;
    if (!first) { sum = state[U.M + row] * exp(state[row] - m) + chunk_sum; }
    state[row] = m;
    state[U.M + row] = sum;
    var w = 1.0;
    if (HAS_MASK) { w = mask[row]; }
    if (w != 0.0) {
      let t = targets[row] - i32(U.v0);
      if (t >= 0 && u32(t) < U.n) { state[2u * U.M + row] = z[base + u32(t)]; }
    }
    if ((U.flags & 2u) != 0u) {
      let l = m + log(sum);
      if (HAS_LSE) { lse[row] = l; }
      var contrib = 0.0;
      if (w != 0.0) { contrib = w * (l - state[2u * U.M + row]); }
      rowloss[row] = contrib;
    }
  }
}
