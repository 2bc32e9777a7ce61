// gelu_backward: dx (+)= dy * (Phi(x) + x phi(x)), Phi the normal CDF, phi its density; with TANH
// (GPT-2's form) dx (+)= dy * (s + 2 x e s^2 u'), s = 1 / (1 + e), e = exp(-2u),
// u' = sqrt(2 / pi) (1 + 3 * 0.044715 x^2)   (C++ twin: gelu_backward in kernels/gelu.cpp).
// One thread per element.
struct Params { n: u32, _pad0: u32, _pad1: u32, _pad2: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

override ACC: bool = false;
override TANH: bool = false;  // the op's attribute tanh = 1

const INV_SQRT2: f32 = 0.70710678118654752440;
const INV_SQRT2PI: f32 = 0.39894228040143267794;
const SQRT_2_OVER_PI: f32 = 0.79788456080286535588;

// #include erf

fn exp_minus_2u(v: f32) -> f32 {
  return exp(min(-2.0 * SQRT_2_OVER_PI * (v + 0.044715 * (v * v * v)), 88.0));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (i >= U.n) { return; }
  let xi = x[i];
  var d: f32;
  if (TANH) {
    // Beyond |x| = 20 the derivative is 0 or 1 in fp32; the clamp keeps x^2 finite.
    let xc = clamp(xi, -20.0, 20.0);
    let e = exp_minus_2u(xc);
    let s = 1.0 / (1.0 + e);
    let du = SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * (xc * xc));
    d = s + xc * (2.0 * ((e * s) * s) * du);
  } else {
    let cdf = 0.5 * (1.0 + erf_f32(xi * INV_SQRT2));
    let pdf = exp(-0.5 * xi * xi) * INV_SQRT2PI;
    d = cdf + xi * pdf;
  }
  var g = dy[i] * d;
  if (ACC) { g = dx[i] + g; }
  dx[i] = g;
}
