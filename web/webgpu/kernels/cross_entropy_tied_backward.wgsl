// cross_entropy_tied_backward: d loss / d logits of one vocabulary chunk, in place
// (C++ twin: kernels/cross_entropy_tied.cpp). The executor recomputes the chunk's logits
// z_c = x W_c^T [M, n] with the matrix-product kernels, runs `main` on them, then the products
// dx (+)= dz_c W_c and dW_c (+)= dz_c^T x.
//   entry `count_main`: one workgroup: sum(mask) into count[0] (once per run, with a mask);
//   entry `main`:       one workgroup per row: dz = (exp(z - lse) - [v == t]) * mask / sum(mask),
//                       the forward's lse; masked-out rows (or no row counting) get 0.
struct Params { M: u32, n: u32, v0: u32, _pad: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read_write> z: array<f32>;  // this chunk's logits [M, n] -> dz
@group(0) @binding(2) var<storage, read> targets: array<i32>;
@group(0) @binding(3) var<storage, read> lse: array<f32>;
@group(0) @binding(4) var<storage, read> mask: array<f32>;
@group(0) @binding(5) var<storage, read_write> count: array<f32>;

override HAS_MASK: bool = false;

const RED_WG: u32 = 256u;
// #include reduce

@compute @workgroup_size(256)
fn count_main(@builtin(local_invocation_index) lid: u32) {
  var s = 0.0;
  for (var i = lid; i < U.M; i += 256u) { s += mask[i]; }
  let total = wg_sum(s, lid, 256u);
  if (lid == 0u) { count[0] = total; }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= U.M) { return; }
  let base = row * U.n;
  var cnt = f32(U.M);
  var w = 1.0;
  if (HAS_MASK) {
    cnt = count[0];
    w = mask[row];
  }
  var scale = 0.0;
  if (cnt != 0.0) { scale = w / cnt; }
  let l = lse[row];
  var t = -1;
  if (scale != 0.0) { t = targets[row] - i32(U.v0); }
  for (var c = lid; c < U.n; c += 64u) {
    var g = 0.0;
    if (scale != 0.0) {
      let p = exp(z[base + c] - l);
      g = p;
      if (i32(c) == t) { g = p - 1.0; }
      g = g * scale;
    }
    z[base + c] = g;
  }
}
