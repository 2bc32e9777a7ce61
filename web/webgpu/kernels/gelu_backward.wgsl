// gelu_backward: dx (+)= dy * (Phi(x) + x phi(x)), Phi the normal CDF, phi its density
// (C++ twin: gelu_backward in kernels/gelu.cpp). One thread per element.
struct Params { n: u32, _pad0: u32, _pad1: u32, _pad2: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

override ACC: bool = false;

const INV_SQRT2: f32 = 0.70710678118654752440;
const INV_SQRT2PI: f32 = 0.39894228040143267794;

// #include erf

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (i >= U.n) { return; }
  let xi = x[i];
  let cdf = 0.5 * (1.0 + erf_f32(xi * INV_SQRT2));
  let pdf = exp(-0.5 * xi * xi) * INV_SQRT2PI;
  var g = dy[i] * (cdf + xi * pdf);
  if (ACC) { g = dx[i] + g; }
  dx[i] = g;
}
