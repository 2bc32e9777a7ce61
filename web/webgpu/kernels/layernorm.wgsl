// layernorm: per row of C: y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps), biased
// variance; mean and rstd are saved for the backward. (C++ twin: kernels/layernorm.cpp)
// One workgroup of 64 threads per row; two passes (mean, then squared deviations from it), each
// a workgroup reduction: the tree of common/reduce.wgsl, or common/reduce_subgroup.wgsl where the
// executor resolves the include to it (options.reductions); either repeats run to run. The CPU
// sums in double; here fp32 partial sums of C/64 terms each.
struct Params { N: u32, C: u32, eps: f32, _pad: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> mean: array<f32>;
@group(0) @binding(6) var<storage, read_write> rstd: array<f32>;

override HAS_MEAN: bool = true;
override HAS_RSTD: bool = true;

const WG: u32 = 64u;
const RED_WG: u32 = 64u;
// #include reduce

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= U.N) { return; }
  let base = row * U.C;
  let fc = f32(U.C);
  var s = 0.0;
  for (var c = lid; c < U.C; c += WG) { s += x[base + c]; }
  let m = wg_sum(s, lid, WG) / fc;
  var q = 0.0;
  for (var c = lid; c < U.C; c += WG) { let d = x[base + c] - m; q += d * d; }
  let var_ = wg_sum(q, lid, WG) / fc;
  let r = 1.0 / sqrt(var_ + U.eps);
  for (var c = lid; c < U.C; c += WG) { y[base + c] = (x[base + c] - m) * r * w[c] + b[c]; }
  if (lid == 0u) {
    if (HAS_MEAN) { mean[row] = m; }
    if (HAS_RSTD) { rstd[row] = r; }
  }
}
