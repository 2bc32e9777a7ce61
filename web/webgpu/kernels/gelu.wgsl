// gelu: y = 0.5 x (1 + erf(x / sqrt 2)), the exact GELU, or with TANH GPT-2's approximation
// y = 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3)   (C++ twin: kernels/gelu.cpp).
// One thread per element.
struct Params { n: u32, _pad0: u32, _pad1: u32, _pad2: u32 }
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

override TANH: bool = false;  // the op's attribute tanh = 1

const INV_SQRT2: f32 = 0.70710678118654752440;
const SQRT_2_OVER_PI: f32 = 0.79788456080286535588;

// #include erf

// exp(-2u): 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)), as the C++ kernel computes it. The clamp
// keeps exp finite (WGSL leaves an overflowing exp undefined).
fn exp_minus_2u(v: f32) -> f32 {
  return exp(min(-2.0 * SQRT_2_OVER_PI * (v + 0.044715 * (v * v * v)), 88.0));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.y * nwg.x + wid.x) * 256u + lid;
  if (i >= U.n) { return; }
  let xi = x[i];
  if (TANH) {
    y[i] = xi / (1.0 + exp_minus_2u(xi));
  } else {
    y[i] = 0.5 * xi * (1.0 + erf_f32(xi * INV_SQRT2));
  }
}
