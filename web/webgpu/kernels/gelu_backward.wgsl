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

// erf(x) for fp32, faithfully rounded (max error < 1 ulp with exact exp): Norbert Juffa's
// polynomial approximation (the one PyTorch's and MLX's Metal backends use). WGSL has no erf.
fn erf_f32(a: f32) -> f32 {
  let t = abs(a);
  let s = a * a;
  if (t > 0.927734375) {
    var r = fma(-1.72853470e-5, t, 3.83197126e-4);
    let u = fma(-3.88396438e-3, t, 2.42546219e-2);
    r = fma(r, s, u);
    r = fma(r, t, -1.06777877e-1);
    r = fma(r, t, -6.34846687e-1);
    r = fma(r, t, -1.28717512e-1);
    r = fma(r, t, -t);
    r = 1.0 - exp(r);
    return select(r, -r, a < 0.0);
  }
  var r = -5.96761703e-4;
  r = fma(r, s, 4.99119423e-3);
  r = fma(r, s, -2.67681349e-2);
  r = fma(r, s, 1.12819925e-1);
  r = fma(r, s, -3.76125336e-1);
  r = fma(r, s, 1.28379166e-1);
  return fma(r, a, a);
}

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
